"""End to end: no prohibition in any format is rendered as an instruction in the block."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from polarity_corpus import FOREIGN_FILES, PROHIBITED, TEMPLATE_FILE
from rules_testkit import write_rules

from memory_core.rules.service import RulesService

pytestmark = pytest.mark.anyio

_LINE = re.compile(r"^- \*\*(?P<marker>[A-Z ]+)\*\* (?P<text>.*?) \[\d+\](?: _\(.*\)_)?$")


async def test_every_rendered_prohibition_says_not_or_never(
    service: RulesService, project: Path
) -> None:
    paths = write_rules(project, {**FOREIGN_FILES, "rules/boundaries.md": TEMPLATE_FILE})
    report = await service.upsert_markdown([str(p) for p in paths], scope="p")
    assert report.documents_failed == 0
    seen = 0
    for task in PROHIBITED:
        result = await service.query_directives(task, scope="p", token_budget=4000, max_items=60)
        for line in result.context_block.splitlines():
            match = _LINE.match(line)
            if match is None or match["text"] not in PROHIBITED:
                continue
            seen += 1
            marker, text = match["marker"], match["text"]
            assert marker.endswith("NOT") or re.match(
                r"(?i)(?:❌|(?:never|do not|don't|avoid|no)\b)", text
            ), line
    assert seen >= len(PROHIBITED)
    listed = {d.text: d.polarity for d in result.directives}
    assert all(listed[t] == "dont" for t in PROHIBITED if t in listed)
