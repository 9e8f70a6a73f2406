"""Pack ranked directives into a token budget and render the context block (pure).

Budget rules (Requirement 4): the top three MUST directives are always included, up to a
safety cap (2,000 tokens by default); every other directive is added in score order while the
block stays within the budget, and packing stops at the first one that does not fit (the
spec's order: a lower-ranked directive never takes the place of a higher-ranked one). Counts are exact: the finished block is counted with the configured
tokenizer and trimmed if the per-line estimate was off.

Layout (Requirement 5.5): a header naming the detected context, then one group per rule (in
order of its best directive) listing directives with severity markers and ``[n]`` citation
markers, each optionally followed by a breadcrumb (source path, lines, section).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memory_core.rules.models import Citation, DetectedContext, RankedDirective
from rules_parser.polarity import directive_marker

__all__ = ["PackedBlock", "pack_directives", "render_header"]

_FORCED_MUST = 3


def render_header(context: DetectedContext) -> str:
    """The block's header line(s): what the task was detected to be about."""
    parts = [f"layer {context.detected_layer or 'unknown'}"]
    if context.topics:
        parts.append("topics: " + ", ".join(context.topics[:6]))
    tech = [*context.languages, *context.frameworks, *context.platforms]
    if tech:
        parts.append("tech: " + ", ".join(tech[:6]))
    parts.append(f"confidence {context.confidence:.2f}")
    return "## Project rules for this task\n_Context: " + " · ".join(parts) + "_\n"


def _rule_heading(directive: RankedDirective) -> str:
    title = directive.rule_title or directive.rule_id
    return f"\n### {title}\n"


def _breadcrumb(directive: RankedDirective) -> str:
    if directive.line_start is not None:
        lines = f":{directive.line_start}"
        if directive.line_end and directive.line_end != directive.line_start:
            lines += f"-{directive.line_end}"
    else:
        lines = ""
    crumbs = list(directive.section[1:])
    if crumbs and crumbs[-1].strip() == directive.text.strip():
        crumbs.pop()  # template directives are headings: do not repeat the statement
    section = " › ".join(s for s in crumbs if s.casefold() != "directives")
    return (
        f"  _source: {directive.source_path}{lines}" + (f" · {section}" if section else "") + "_\n"
    )


def _line(directive: RankedDirective, ref: int, breadcrumbs: bool) -> str:
    text = " ".join(directive.text.split())
    marker = directive_marker(directive.severity, directive.polarity, text)
    why = f" _({directive.reason})_" if directive.reason else ""
    line = f"- **{marker}** {text} [{ref}]{why}\n"
    return line + (_breadcrumb(directive) if breadcrumbs else "")


@dataclass(frozen=True)
class PackedBlock:
    """The packed result."""

    context_block: str
    selected: list[RankedDirective]
    citations: list[Citation]
    tokens_used: int
    forced_must: int
    dropped_for_budget: int


def _footer(left_out: int) -> str:
    if left_out <= 0:
        return ""
    return f"\n_{left_out} more not shown_\n"


def _render(
    header: str, chosen: Sequence[RankedDirective], breadcrumbs: bool, footer: str = ""
) -> tuple[str, list[RankedDirective]]:
    # Groups in order of their best (first chosen) directive; chosen is in rank order.
    groups: dict[str, list[RankedDirective]] = {}
    for directive in chosen:
        groups.setdefault(directive.rule_id, []).append(directive)
    parts = [header]
    ordered: list[RankedDirective] = []
    for members in groups.values():
        parts.append(_rule_heading(members[0]))
        for directive in members:
            ordered.append(directive)
            parts.append(_line(directive, len(ordered), breadcrumbs))
    parts.append(footer)
    return "".join(parts), ordered


def pack_directives(
    ranked: Sequence[RankedDirective],
    *,
    header: str,
    budget: int,
    safety_cap: int,
    count: Callable[[str], int],
    include_breadcrumbs: bool = False,
    left_out: int = 0,
) -> PackedBlock:
    """Choose and render directives within ``budget`` tokens.

    Args:
        ranked: candidates, best first.
        header: the header text (counted against the budget).
        budget: the token budget (hard, except for the forced top MUST directives).
        safety_cap: the most tokens the forced MUST directives may take the block to.
        count: exact token counter.
        include_breadcrumbs: add source path, lines and section under each directive.
        left_out: candidates already left out before packing (not relevant enough); the
            block's last line says how many directives it does not show.

    Returns:
        The block, the chosen directives best first (``forced`` and ``ref`` set),
        citations, exact tokens used, how many were forced, how many the budget left out.
    """
    if count(header) > budget:
        header = "## Project rules for this task\n"
    used = count(header)
    # Room for the "N more not shown" line (its exact count is settled after packing).
    used += count(_footer(left_out + len(ranked) + 100))
    chosen: list[RankedDirective] = []
    rules_in: set[str] = set()
    forced_ids: set[str] = set()
    # Rank of each directive looked at. ``ranked`` is only read as far as packing goes (the
    # third MUST, the first directive that does not fit): the service builds its entries
    # on demand, and most of a 50-entry ranking never reaches the block.
    position_of: dict[str, int] = {}
    musts: list[RankedDirective] = []
    for position, directive in enumerate(ranked):
        if directive.severity == "MUST":
            position_of[directive.directive_id] = position
            musts.append(directive)
            if len(musts) == _FORCED_MUST:
                break

    def cost(directive: RankedDirective) -> int:
        heading = 0 if directive.rule_id in rules_in else count(_rule_heading(directive))
        return heading + count(_line(directive, 99, include_breadcrumbs))

    for directive in musts:
        needed = cost(directive)
        if used + needed > max(safety_cap, budget):
            continue
        used += needed
        chosen.append(directive)
        rules_in.add(directive.rule_id)
        forced_ids.add(directive.directive_id)
    dropped = 0
    for position, directive in enumerate(ranked):
        if directive.directive_id in forced_ids:
            continue
        needed = cost(directive)
        if used + needed > budget:
            # Stop, do not skip: everything from here on is left out.
            forced_after = sum(1 for i in forced_ids if position_of[i] > position)
            dropped = len(ranked) - position - forced_after
            break
        used += needed
        position_of[directive.directive_id] = position
        chosen.append(directive)
        rules_in.add(directive.rule_id)
    chosen.sort(key=lambda d: position_of[d.directive_id])
    limit = max(budget, min(safety_cap, used)) if forced_ids else budget
    while True:
        block, ordered = _render(header, chosen, include_breadcrumbs, _footer(left_out + dropped))
        tokens = count(block)
        # The per-line estimate can be off by a token or two at joins: trim the weakest
        # unforced directive until the exact count fits.
        removable = [d for d in chosen if d.directive_id not in forced_ids]
        if tokens <= limit or not removable:
            break
        chosen.remove(removable[-1])
        dropped += 1
    if not chosen and not forced_ids:
        block = header if count(header) <= budget else ""
        tokens = count(block)
        ordered = []
    citations = [
        Citation(
            ref=index,
            source_path=d.source_path,
            line_start=d.line_start,
            line_end=d.line_end,
            rule_id=d.rule_id,
            directive_id=d.directive_id,
            section=list(d.section),
        )
        for index, d in enumerate(ordered, start=1)
    ]
    refs = {d.directive_id: index for index, d in enumerate(ordered, start=1)}
    # Returned best first (Requirement 3.9); the block groups them by rule, linked by ref.
    selected = sorted(
        (
            d.model_copy(
                update={"forced": d.directive_id in forced_ids, "ref": refs[d.directive_id]}
            )
            for d in ordered
        ),
        key=lambda d: position_of[d.directive_id],
    )
    return PackedBlock(
        context_block=block,
        selected=selected,
        citations=citations,
        tokens_used=tokens,
        forced_must=len(forced_ids),
        dropped_for_budget=dropped,
    )
