"""The authorisation hook before scope-selector expansion (seed 004 §12), on every backend: it
sees the principal and the selector as asked, narrows or refuses, and the boundary policy
still checks what it lets through."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from memory_core.errors import ConfigError, InvalidInputError
from memory_core.pipeline.authorisation import AccessDeniedError, AccessRequest, import_hook
from memory_core.pipeline.scopes import ANY, ScopeSelector
from memory_core.pipeline.service import MemoryService
from tests.pipeline.conftest import ServiceFactory
from tests.pipeline.layer_hooks import caller_owns_user_id
from tests.pipeline.layer_kit import ALICE, BOB, EVE

ANN_AT_ACME = {"name": "ann", "org_id": "acme", "users": ["alice"]}


class TenantGuard:
    """A principal reads its own org only, and only the users it is given."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any], Any]] = []

    def __call__(self, request: AccessRequest) -> Mapping[str, Any] | None:
        self.seen.append((request.operation, request.selector.describe(), request.principal))
        principal = request.principal
        if principal is None:
            return None  # the application's own calls (no principal) are not guarded here
        asked = request.selector.values.get("org_id")
        if asked not in (None, principal["org_id"], (principal["org_id"],)):
            raise AccessDeniedError("org_id", f"{principal['name']} may not read {asked!r}")
        narrowed: dict[str, Any] = {"org_id": principal["org_id"]}
        wanted = request.selector.values.get("user_id")
        if wanted is ANY or isinstance(wanted, tuple):
            narrowed["user_id"] = [u for u in principal["users"] if wanted is ANY or u in wanted]
        return narrowed


def _filled(make_service: ServiceFactory, guard: TenantGuard) -> MemoryService:
    service = make_service(authorise=guard)
    service.memorize(ALICE, content="Alice always prefers dark roast coffee in the morning.")
    service.memorize(BOB, content="Bob prefers green tea and never drinks coffee.")
    service.memorize(EVE, content="Eve prefers espresso coffee with sugar every day.")
    return service


def test_the_hook_sees_the_principal_and_narrows_a_selector_before_it_is_expanded(
    make_service: ServiceFactory,
) -> None:
    guard = TenantGuard()
    service = _filled(make_service, guard)
    result = service.retrieve(
        ScopeSelector(org_id="acme", user_id=ANY), "who likes coffee?", principal=ANN_AT_ACME
    )
    assert result.items and {i["scope"]["user_id"] for i in result.items} == {"alice"}
    assert guard.seen[-1] == (
        "retrieve",
        {"org_id": "acme", "user_id": "ANY"},
        ANN_AT_ACME,
    )
    assert service.runs(1)[0]["scope_range"] == {"org_id": ["acme"], "user_id": ["alice"]}
    # no principal: the same selector reads every acme user
    everyone = service.retrieve(ScopeSelector(org_id="acme", user_id=ANY), "who likes coffee?")
    assert {i["scope"]["user_id"] for i in everyone.items} == {"alice", "bob"}


def test_a_refusal_names_the_field_and_nothing_is_read_or_written(
    make_service: ServiceFactory,
) -> None:
    guard = TenantGuard()
    service = _filled(make_service, guard)
    logged = len(service.runs(100))
    with pytest.raises(AccessDeniedError, match="scope field 'org_id': ann may not read") as info:
        service.retrieve(
            ScopeSelector(org_id=["acme", "evil"], user_id=ANY), "coffee", principal=ANN_AT_ACME
        )
    assert info.value.field == "org_id" and info.value.details == {"field": "org_id"}
    refused = [
        lambda: service.memorize(EVE, content="Ann writes into evil.", principal=ANN_AT_ACME),
        lambda: service.evolve(EVE, principal=ANN_AT_ACME),
        lambda: service.list_categories(EVE, include_items=True, principal=ANN_AT_ACME),
        lambda: service.get_category(EVE, "preferences", principal=ANN_AT_ACME),
        lambda: service.get_latest_intention(EVE, principal=ANN_AT_ACME),
    ]
    for call in refused:
        with pytest.raises(AccessDeniedError, match="'org_id'"):
            call()
    assert len(service.runs(100)) == logged  # no run started, nothing stored
    operations = [op for op, _selector, principal in guard.seen if principal is ANN_AT_ACME]
    assert operations == [
        "retrieve", "memorize", "evolve", "list_categories", "get_category",
        "get_latest_intention",
    ]  # fmt: skip
    # the principal's own scope is allowed through every call
    assert service.memorize(ALICE, content="Alice plans the launch.", principal=ANN_AT_ACME)
    assert service.list_categories(ALICE, principal=ANN_AT_ACME)


def test_the_boundary_policy_still_checks_what_the_hook_lets_through(
    make_service: ServiceFactory,
) -> None:
    guard = TenantGuard()
    service = _filled(make_service, guard)
    # the hook fills in the boundary field the caller left out, from the principal
    filled = service.retrieve({"user_id": ANY}, "coffee", principal=ANN_AT_ACME)
    assert {i["scope"]["user_id"] for i in filled.items} == {"alice"}
    # a hook that allows as asked leaves ANY on the boundary field to the policy
    with pytest.raises(InvalidInputError, match="crosses the boundary field 'org_id' with ANY"):
        service.retrieve(ScopeSelector(org_id=ANY, user_id=ANY), "coffee")


def test_a_hook_that_widens_a_field_is_refused_naming_it(make_service: ServiceFactory) -> None:
    def widening(request: AccessRequest) -> Mapping[str, Any]:
        return {"user_id": ANY}

    service = make_service(authorise=widening)
    with pytest.raises(ConfigError, match="widened scope field 'user_id' for retrieve"):
        service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "coffee")
    with pytest.raises(ConfigError, match="widened scope field 'user_id' for memorize"):
        service.memorize(ALICE, content="Alice prefers tea.")


@pytest.mark.parametrize(
    ("dotted", "message"),
    [
        ("tenant_guard", "not an importable path of the form 'package.module:function'"),
        ("no_such_pkg.guards:tenant_guard", "module 'no_such_pkg.guards' cannot be imported"),
        ("tests.pipeline.layer_hooks:nobody", "has nothing named 'nobody', not a function"),
        ("tests.pipeline.layer_hooks:__all__", "has a list named '__all__', not a function"),
    ],
)
def test_a_hook_named_by_a_path_that_does_not_import_is_refused_naming_it(
    dotted: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        import_hook(dotted)


def test_a_hook_path_reads_with_a_colon_or_a_dot() -> None:
    assert import_hook("tests.pipeline.layer_hooks:caller_owns_user_id") is caller_owns_user_id
    assert import_hook("tests.pipeline.layer_hooks.caller_owns_user_id") is caller_owns_user_id
