"""The Filter Expression Language: the AST, the field catalog and the parser.

Grammar (shared by RQL ``FILTER`` and the CLI's ``--filter``)::

    expr      := and_expr ( OR and_expr )*
    and_expr  := term ( AND term )*
    term      := NOT term | '(' expr ')' | predicate
    predicate := field op value | field [NOT] IN '(' value (',' value)* ')'
    op        := = | != | < | <= | > | >= | LIKE | GLOB

``AND`` binds tighter than ``OR``. Fields must be qualified (``doc.*`` / ``chunk.*``) and known;
values are typed (numbers for ``chunk.offset`` / ``chunk.tokens``, strings elsewhere). The AST
is the storage-neutral filter tree of ``memory_core.filters`` (fields mapped by ``FIELD_MAP``),
which each backend compiles to parameterised SQL: no text from a query ever becomes SQL.

Hostile input is bounded (:class:`FilterLimits`): nesting deeper than ``limits.filter_depth``
(parentheses, ``NOT``) or more than ``limits.filter_terms`` terms (predicates and ``IN`` values)
is refused with an error naming the limit and the setting, before any recursion runs deep or
any SQL is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memory_core.documents.lexer import Token, tokenize
from memory_core.errors import LimitExceededError, QuerySyntaxError
from memory_core.filters import And, Compare, Filter, InList, Not, Or

__all__ = [
    "FIELDS",
    "FIELD_MAP",
    "Expr",
    "FieldType",
    "FilterLimits",
    "Parser",
    "parse_filter",
    "syntax_error",
]

FieldType = Literal["text", "number"]

# The Recall field catalog (v0.1). doc.size is stored but, as the spec says, not exposed.
FIELDS: dict[str, FieldType] = {
    "doc.id": "text",
    "doc.path": "text",
    "doc.mtime": "text",
    "doc.hash": "text",
    "doc.tag": "text",
    "doc.source": "text",
    "chunk.id": "text",
    "chunk.doc_id": "text",
    "chunk.offset": "number",
    "chunk.tokens": "number",
    "chunk.text": "text",
}
_COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
_PATTERN_OPS = ("LIKE", "GLOB")
Value = str | int | float


Expr = Filter

# FEL's field names (the Recall catalog) as the storage-neutral filter fields.
FIELD_MAP: dict[str, str] = {
    "doc.id": "resource.uid",
    "doc.path": "resource.uri",
    "doc.mtime": "resource.mtime",
    "doc.hash": "resource.content_hash",
    "doc.tag": "resource.tags",
    "doc.source": "resource.source",
    "chunk.id": "item.uid",
    "chunk.doc_id": "resource.uid",
    "chunk.offset": "item.start_offset",
    "chunk.tokens": "item.token_count",
    "chunk.text": "item.text",
}


@dataclass(frozen=True, slots=True)
class FilterLimits:
    """Bounds of one filter (the defaults are those of ``LimitSettings``)."""

    max_depth: int = 64
    max_terms: int = 256


def syntax_error(
    token: Token, message: str, expected: str, hint: str | None = None
) -> QuerySyntaxError:
    return QuerySyntaxError(
        f"{message}, found {token.describe()}",
        line=token.line,
        column=token.column,
        expected=expected,
        hint=hint or f"write {expected} at that position (the grammar is in docs/search.md)",
    )


class Parser:
    """A recursive-descent parser over a token list (RQL reuses it for its clauses)."""

    def __init__(self, tokens: Sequence[Token], limits: FilterLimits | None = None) -> None:
        self.tokens = list(tokens)
        self.pos = 0
        self.limits = limits or FilterLimits()
        self._depth = 0
        self._terms = 0

    def _nest(self) -> None:
        self._depth += 1
        if self._depth > self.limits.max_depth:
            raise LimitExceededError(
                f"filter nested too deeply (parentheses and NOT) at line {self.current.line}, "
                f"column {self.current.column}",
                value=self._depth,
                limit=self.limits.max_depth,
                setting="limits.filter_depth",
                hint="flatten the filter (NOT NOT x is x; a IN (...) list replaces nested ORs), "
                "or raise limits.filter_depth",
            )

    def _count_term(self) -> None:
        self._terms += 1
        if self._terms > self.limits.max_terms:
            raise LimitExceededError(
                "filter has too many terms (predicates and IN values)",
                value=self._terms,
                limit=self.limits.max_terms,
                setting="limits.filter_terms",
                hint="narrow the filter (a LIKE or GLOB pattern can replace many equalities), "
                "or raise limits.filter_terms",
            )

    @property
    def current(self) -> Token:
        return self.tokens[self.pos]

    def advance(self) -> Token:
        token = self.tokens[self.pos]
        if token.kind != "end":
            self.pos += 1
        return token

    def at_keyword(self, *words: str) -> bool:
        token = self.current
        return token.kind == "ident" and token.value.upper() in words

    def at_punct(self, char: str) -> bool:
        return self.current.kind == "punct" and self.current.value == char

    def expect_keyword(self, word: str) -> Token:
        if not self.at_keyword(word):
            raise syntax_error(self.current, f"expected {word}", word)
        return self.advance()

    def expect_punct(self, char: str) -> Token:
        if not self.at_punct(char):
            raise syntax_error(self.current, f"expected {char!r}", repr(char))
        return self.advance()

    # -- FEL ------------------------------------------------------------------------------

    def parse_expr(self) -> Expr:
        operands = [self.parse_and()]
        while self.at_keyword("OR"):
            self.advance()
            operands.append(self.parse_and())
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def parse_and(self) -> Expr:
        operands = [self.parse_term()]
        while self.at_keyword("AND"):
            self.advance()
            operands.append(self.parse_term())
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def parse_term(self) -> Expr:
        if self.at_keyword("NOT"):
            self._nest()
            self.advance()
            negated = Not(self.parse_term())
            self._depth -= 1
            return negated
        if self.at_punct("("):
            self._nest()
            self.advance()
            inner = self.parse_expr()
            self.expect_punct(")")
            self._depth -= 1
            return inner
        return self.parse_predicate()

    def parse_field(self) -> tuple[str, FieldType]:
        token = self.current
        if token.kind != "ident" or token.value.upper() in ("AND", "OR", "NOT", "IN"):
            raise syntax_error(token, "expected a field", "a qualified field such as doc.path")
        name = token.value.lower()
        if "." not in name:
            raise syntax_error(
                token,
                "filter fields must be qualified",
                "doc.* or chunk.*",
                hint=f"write doc.{name} or chunk.{name}; fields: {', '.join(FIELDS)}",
            )
        if name not in FIELDS:
            raise syntax_error(
                token, f"unknown field {token.value!r}", "a known field", hint=", ".join(FIELDS)
            )
        self.advance()
        return name, FIELDS[name]

    def parse_value(self, field: str, kind: FieldType, *, pattern: bool = False) -> Value:
        token = self.current
        if token.kind == "string":
            if kind == "number" and not pattern:
                raise syntax_error(
                    token, f"{field} is a number", "a number", hint="remove the quotes"
                )
            self.advance()
            return token.value
        if token.kind == "number":
            if kind == "text":
                raise syntax_error(
                    token, f"{field} is text", "a quoted string", hint=f"write '{token.value}'"
                )
            self.advance()
            return _number(token)
        raise syntax_error(token, "expected a value", "a quoted string or a number")

    def parse_predicate(self) -> Expr:
        self._count_term()
        field, kind = self.parse_field()
        token = self.current
        negated = False
        if self.at_keyword("NOT"):
            self.advance()
            negated = True
            if not self.at_keyword("IN"):
                raise syntax_error(self.current, "expected IN after NOT", "IN")
        if self.at_keyword("IN"):
            self.advance()
            self.expect_punct("(")
            values = [self.parse_value(field, kind)]
            while self.at_punct(","):
                self.advance()
                self._count_term()
                values.append(self.parse_value(field, kind))
            self.expect_punct(")")
            return InList(FIELD_MAP[field], tuple(values), negated)
        if token.kind == "op" and token.value in _COMPARISONS:
            self.advance()
            op = token.value
            return Compare(FIELD_MAP[field], op, self.parse_value(field, kind))  # type: ignore[arg-type]
        if token.kind == "ident" and token.value.upper() in _PATTERN_OPS:
            self.advance()
            value = self.parse_value(field, "text", pattern=True)
            return Compare(FIELD_MAP[field], token.value.upper(), value)  # type: ignore[arg-type]
        raise syntax_error(token, "expected an operator", "= != < <= > >= LIKE GLOB or IN")


def _number(token: Token) -> int | float:
    text = token.value.replace("_", "")
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise syntax_error(token, "malformed number", "a number such as 42 or 1.5") from None


def parse_filter(text: str, limits: FilterLimits | None = None) -> Expr:
    """Parse a FEL expression (the CLI's ``--filter``).

    Raises:
        QuerySyntaxError: with the line, column and what was expected.
        LimitExceededError: nested deeper, or with more terms, than ``limits`` allow.
    """
    tokens = tokenize(text)
    parser = Parser(tokens, limits)
    if parser.current.kind == "end":
        raise syntax_error(
            parser.current, "the filter is empty", "a predicate such as doc.tag = 'x'"
        )
    expr = parser.parse_expr()
    if parser.current.kind != "end":
        raise syntax_error(parser.current, "unexpected text after the filter", "AND, OR or the end")
    return expr
