"""Pure pieces of the server: scope decisions, the rate limiter, schema compaction."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_core.errors import InvalidInputError, RateLimitedError
from server.mcp_app.app import compact_schema, inline_refs
from server.mcp_app.limits import RateLimiter
from server.mcp_app.schemas import QueryDirectivesOutput, QueryOutput
from server.mcp_app.scoping import (
    ScopeDefaults,
    decide_scope,
    git_root_of,
    paths_from_root_uris,
    require_write_scope,
)


def test_the_first_file_root_inside_the_workspace_names_the_project_scope() -> None:
    decision = decide_scope(
        ["https://example.com/x", "file:///work/alpha", "file:///work/beta"],
        ScopeDefaults(workspace=Path("/work")),
    )
    assert decision.scope == "project:/work/alpha" and decision.source == "roots"
    assert decision.readable == (Path("/work/alpha"),)


def test_an_explicit_scope_wins_over_roots_and_the_workspace() -> None:
    defaults = ScopeDefaults(explicit_scope="team-x", workspace=Path("/w"))
    assert decide_scope(["file:///work/alpha"], defaults).scope == "team-x"


def test_without_roots_the_workspace_then_the_git_root_is_used() -> None:
    assert decide_scope([], ScopeDefaults(workspace=Path("/w"))).source == "workspace"
    assert decide_scope(None, ScopeDefaults(cwd_root=Path("/g"))).scope == "project:/g"
    assert decide_scope(None, ScopeDefaults(cwd_root=Path("/g"))).source == "cwd"


def test_reads_without_a_scope_use_global_and_writes_are_refused() -> None:
    decision = decide_scope([], ScopeDefaults())
    assert decision.read_scope == "global"
    with pytest.raises(InvalidInputError, match="no project scope"):
        require_write_scope(decision)


def test_percent_encoded_root_uris_become_paths() -> None:
    assert paths_from_root_uris(["file:///tmp/my%20project"]) == [Path("/tmp/my project")]


def test_git_root_is_none_outside_a_repository(tmp_path: Path) -> None:
    assert git_root_of(tmp_path) is None
    (tmp_path / ".git").mkdir()
    (tmp_path / "src").mkdir()
    assert git_root_of(tmp_path / "src") == tmp_path.resolve()


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40))
def test_any_folder_name_round_trips_through_a_root_uri(name: str) -> None:
    folder = Path("/tmp") / name.replace("/", "_").replace("\x00", "_")
    decision = decide_scope([folder.as_uri()], ScopeDefaults(workspace=Path("/tmp")))
    assert decision.root == folder.resolve()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_limiter_allows_a_burst_then_refuses_with_retry_after() -> None:
    clock = Clock()
    limiter = RateLimiter(per_minute=60, burst=3, clock=clock)
    for _ in range(3):
        limiter.check("a")
    with pytest.raises(RateLimitedError) as caught:
        limiter.check("a")
    assert caught.value.retry_after == pytest.approx(1.0)
    limiter.check("b")  # other clients are unaffected
    clock.now = 1.0
    limiter.check("a")  # one second refills one call at 60/min


def test_a_zero_limit_turns_the_limiter_off() -> None:
    limiter = RateLimiter(per_minute=0, burst=1, clock=Clock())
    for _ in range(100):
        limiter.check("a")


def test_compaction_keeps_a_property_named_title_and_folds_nullable_enums() -> None:
    schema = {
        "title": "X",
        "properties": {
            "title": {"title": "Title", "type": "string"},
            "mode": {"anyOf": [{"enum": ["a", "b"], "type": "string"}, {"type": "null"}]},
        },
    }
    compact = compact_schema(schema)
    assert compact == {
        "properties": {
            "title": {"type": "string"},
            "mode": {"enum": ["a", "b", None], "type": ["string", "null"]},
        }
    }
    jsonschema.validate({"title": "t", "mode": None}, compact)


@pytest.mark.parametrize("model", [QueryDirectivesOutput, QueryOutput])
def test_compacted_output_schemas_accept_what_the_models_produce(model: type) -> None:
    compact = compact_schema(inline_refs(model.model_json_schema()), output=True)
    assert "$defs" not in str(compact)
    example = {
        QueryDirectivesOutput: {
            "context_block": "b",
            "citations": [{"ref": 1, "source_path": "a.md", "rule_id": "r"}],
            "diagnostics": {
                "detected_layer": None,
                "topics": [],
                "confidence": 0.5,
                "retrieval_stats": {"searched": 1, "considered": 1, "selected": 1},
                "token_budget": 900,
                "tokens_used": 10,
                "semantic_available": False,
                "execution_ms": 1.0,
                "warnings": [],
            },
        },
        QueryOutput: {"engine": "hierarchy", "answer": "a", "sources": [], "warnings": []},
    }[model]
    jsonschema.validate(model.model_validate(example).model_dump(mode="json"), compact)
