"""Turn markdown-it tokens into a small tree of blocks with 1-based source lines.

The rest of the parser walks this tree instead of the flat token stream: headings,
paragraphs, fences, lists of items (each holding its own blocks), block quotes and "other"
(tables, rules, HTML). Line spans are trimmed of trailing blank lines, which markdown-it
includes in list item maps.
"""

from __future__ import annotations

from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

__all__ = [
    "Block",
    "BlockQuote",
    "Fence",
    "Heading",
    "ListBlock",
    "ListItem",
    "Other",
    "Paragraph",
    "parse_blocks",
]


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    text: str
    line_start: int
    line_end: int


@dataclass(frozen=True, slots=True)
class Paragraph:
    text: str
    line_start: int
    line_end: int


@dataclass(frozen=True, slots=True)
class Fence:
    info: str
    code: str
    closed: bool
    line_start: int
    line_end: int

    @property
    def language(self) -> str | None:
        word = self.info.split(maxsplit=1)[0] if self.info.strip() else ""
        return word.strip("{}.") or None


@dataclass(frozen=True, slots=True)
class ListItem:
    blocks: tuple[Block, ...]
    line_start: int
    line_end: int


@dataclass(frozen=True, slots=True)
class ListBlock:
    ordered: bool
    items: tuple[ListItem, ...]
    line_start: int
    line_end: int


@dataclass(frozen=True, slots=True)
class BlockQuote:
    blocks: tuple[Block, ...]
    line_start: int
    line_end: int


@dataclass(frozen=True, slots=True)
class Other:
    kind: str
    text: str
    line_start: int
    line_end: int


Block = Heading | Paragraph | Fence | ListBlock | BlockQuote | Other

# Only block structure is needed: inline tokens' raw ``content`` is what the parser reads, so
# the inline pass (half of markdown-it's time) is switched off.
_MD = MarkdownIt("commonmark").enable("table").disable("inline")


@dataclass
class _Cursor:
    tokens: list[Token]
    lines: list[str]
    pos: int = 0


def _span(cur: _Cursor, token: Token) -> tuple[int, int]:
    start, end = token.map if token.map else (0, 1)
    # Trim trailing blank lines (list items and quotes include them); never below start.
    while end - 1 > start and end - 1 < len(cur.lines) and not cur.lines[end - 1].strip():
        end -= 1
    return start + 1, max(start + 1, end)


def _fence_closed(cur: _Cursor, token: Token, end_line: int) -> bool:
    # markdown-it silently runs an unclosed fence to the end of its container; the last line
    # of a closed fence is a run of the same fence character at least as long as the opener.
    if end_line - (token.map[0] if token.map else 0) < 2:
        return False
    last = cur.lines[end_line - 1].strip() if end_line - 1 < len(cur.lines) else ""
    marker = token.markup
    # Inside lists or quotes the closing line carries the container prefix ("> ```").
    last = last.lstrip("> \t")
    return bool(marker) and last.startswith(marker) and set(last) <= {marker[0]}


def _read_blocks(cur: _Cursor, closing: str | None) -> tuple[Block, ...]:
    blocks: list[Block] = []
    tokens = cur.tokens
    while cur.pos < len(tokens):
        tok = tokens[cur.pos]
        if closing is not None and tok.type == closing:
            cur.pos += 1
            return tuple(blocks)
        ttype = tok.type
        if ttype == "heading_open":
            inline = tokens[cur.pos + 1]
            start, end = _span(cur, tok)
            blocks.append(Heading(int(tok.tag[1:]), inline.content.strip(), start, end))
            cur.pos += 3
        elif ttype == "paragraph_open":
            inline = tokens[cur.pos + 1]
            start, end = _span(cur, tok)
            blocks.append(Paragraph(inline.content.strip(), start, end))
            cur.pos += 3
        elif ttype in ("fence", "code_block"):
            start, end = _span(cur, tok)
            raw_end = tok.map[1] if tok.map else end
            closed = ttype == "code_block" or _fence_closed(cur, tok, raw_end)
            code = tok.content
            blocks.append(Fence(tok.info.strip(), code, closed, start, end))
            cur.pos += 1
        elif ttype in ("bullet_list_open", "ordered_list_open"):
            start, end = _span(cur, tok)
            cur.pos += 1
            items: list[ListItem] = []
            close = ttype.replace("_open", "_close")
            while cur.pos < len(tokens) and tokens[cur.pos].type != close:
                item_tok = tokens[cur.pos]
                if item_tok.type != "list_item_open":  # defensive: skip anything unexpected
                    cur.pos += 1
                    continue
                istart, iend = _span(cur, item_tok)
                cur.pos += 1
                inner = _read_blocks(cur, "list_item_close")
                items.append(ListItem(inner, istart, iend))
            cur.pos += 1
            blocks.append(ListBlock(ttype.startswith("ordered"), tuple(items), start, end))
        elif ttype == "blockquote_open":
            start, end = _span(cur, tok)
            cur.pos += 1
            inner = _read_blocks(cur, "blockquote_close")
            blocks.append(BlockQuote(inner, start, end))
        elif ttype == "table_open":
            start, end = _span(cur, tok)
            depth = 0
            while cur.pos < len(tokens):
                depth += tokens[cur.pos].nesting
                cur.pos += 1
                if depth == 0:
                    break
            text = "\n".join(cur.lines[start - 1 : end])
            blocks.append(Other("table", text, start, end))
        elif ttype in ("hr", "html_block"):
            start, end = _span(cur, tok)
            blocks.append(Other(ttype, tok.content, start, end))
            cur.pos += 1
        else:
            # Closing tokens of containers we did not open (should not happen) or unknown
            # block types from plugins: step over them rather than fail.
            cur.pos += 1
    return tuple(blocks)


def parse_blocks(text: str) -> tuple[Block, ...]:
    """Parse markdown into blocks. ``text`` must use ``\\n`` line endings.

    Args:
        text: markdown source.

    Returns:
        The top-level blocks in source order.
    """
    cur = _Cursor(_MD.parse(text), text.split("\n"))
    return _read_blocks(cur, None)
