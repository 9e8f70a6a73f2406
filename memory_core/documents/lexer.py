"""The tokenizer shared by RQL statements and FEL filters.

Every token carries its 1-based line and column, so parse errors point at the exact place.
Strings take single or double quotes (a doubled quote inside is a literal quote); keywords are
case-insensitive; nothing else is accepted, so odd input fails here with a position rather
than later with a surprise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memory_core.errors import QuerySyntaxError

__all__ = ["Token", "TokenKind", "tokenize"]

TokenKind = Literal["ident", "string", "number", "op", "punct", "end"]

_OPERATORS = ("<=", ">=", "!=", "<>", "=", "<", ">")
_PUNCT = "(),;*"
_MAX_QUERY_CHARS = 100_000


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    value: str
    line: int
    column: int
    offset: int

    def describe(self) -> str:
        if self.kind == "end":
            return "end of input"
        if self.kind == "string":
            return f"string {self.value[:40]!r}"
        return f"{self.value[:40]!r}"


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    start = text.rfind("\n", 0, offset) + 1
    return line, offset - start + 1


def tokenize(text: str) -> list[Token]:
    """Tokens of ``text`` ending with an ``end`` token.

    Raises:
        QuerySyntaxError: an unterminated string, a character that starts no token, or text
            longer than 100 000 characters.
    """
    if len(text) > _MAX_QUERY_CHARS:
        raise QuerySyntaxError(
            f"query is {len(text)} characters long, over the {_MAX_QUERY_CHARS} limit",
            line=1,
            column=1,
            hint="shorten the query",
        )
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char.isspace():
            i += 1
            continue
        if char == "-" and text.startswith("--", i):  # SQL-style comment to end of line
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        line, column = _position(text, i)
        if char in "'\"":
            j, parts = i + 1, []
            while True:
                end = text.find(char, j)
                if end < 0:
                    raise QuerySyntaxError(
                        "unterminated string",
                        line=line,
                        column=column,
                        expected=f"a closing {char}",
                        hint="close the string; double a quote to include it literally",
                    )
                parts.append(text[j:end])
                if text.startswith(char, end + 1):
                    parts.append(char)
                    j = end + 2
                    continue
                i = end + 1
                break
            tokens.append(Token("string", "".join(parts), line, column, i))
            continue
        if char.isdigit() or (char in "+-." and i + 1 < n and text[i + 1].isdigit()):
            j = i + 1
            while j < n and (text[j].isdigit() or text[j] in ".eE_"):
                j += 1
            tokens.append(Token("number", text[i:j], line, column, i))
            i = j
            continue
        if char.isalpha() or char == "_":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] in "_."):
                j += 1
            tokens.append(Token("ident", text[i:j], line, column, i))
            i = j
            continue
        operator = next((op for op in _OPERATORS if text.startswith(op, i)), None)
        if operator:
            tokens.append(Token("op", "!=" if operator == "<>" else operator, line, column, i))
            i += len(operator)
            continue
        if char in _PUNCT:
            tokens.append(Token("punct", char, line, column, i))
            i += 1
            continue
        raise QuerySyntaxError(
            f"unexpected character {char!r}",
            line=line,
            column=column,
            expected="a field, a value, an operator or a keyword",
            hint="quote text values with ' or \"",
        )
    line, column = _position(text, n)
    tokens.append(Token("end", "", line, column, n))
    return tokens
