"""The authorisation hook (seed 004 §12) on the durable runners: it narrows a selector before
the Burr or Temporal run starts, the run reads only what it let through, and a refusal starts
no run, on the in-memory, SQLite and PostgreSQL stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory_core.pipeline.authorisation import AccessDeniedError
from memory_core.pipeline.scopes import ANY, ScopeSelector
from tests.pipeline.layer_kit import ALICE, BOB, EVE
from tests.pipeline.test_authorisation import ANN_AT_ACME, TenantGuard
from tests.pipeline_runners.conftest import BACKENDS, StoreFactory, opened_service, runner_named


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["burr", "temporal"])
def test_the_hook_narrows_and_refuses_before_the_runner_starts(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    fresh_store: StoreFactory,
    name: str,
    backend: str,
) -> None:
    runner = runner_named(request, tmp_path, name)
    store: Any = fresh_store(backend)
    guard = TenantGuard()
    with opened_service(runner, store, authorise=guard) as service:
        service.memorize(ALICE, content="Alice always prefers dark roast coffee in the morning.")
        service.memorize(BOB, content="Bob prefers green tea and never drinks coffee.")
        service.memorize(EVE, content="Eve prefers espresso coffee with sugar every day.")
        result = service.retrieve(
            ScopeSelector(org_id="acme", user_id=ANY), "who likes coffee?", principal=ANN_AT_ACME
        )
        assert result.items and {i["scope"]["user_id"] for i in result.items} == {"alice"}
        run = service.runs(1)[0]
        assert (run["kind"], run["runner"]) == ("retrieve", name)
        assert run["scope_range"] == {"org_id": ["acme"], "user_id": ["alice"]}
        assert guard.seen[-1][2] == ANN_AT_ACME
        logged = len(service.runs(100))
        with pytest.raises(AccessDeniedError, match="'org_id'"):
            service.memorize(EVE, content="Ann writes into evil.", principal=ANN_AT_ACME)
        assert len(service.runs(100)) == logged  # refused before any run started
