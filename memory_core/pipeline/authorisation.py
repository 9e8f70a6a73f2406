"""An optional authorisation hook in front of scope selectors (seed 004 §12: "a pluggable
authorization layer before scope-selector expansion").

    def tenant_guard(request: AccessRequest) -> Mapping[str, Any] | None:
        org = request.principal["org_id"]          # who is asking, as the caller says
        asked = request.selector.values.get("org_id")
        if asked not in (None, org):
            raise AccessDeniedError("org_id", f"{request.principal['user']} is not in {asked!r}")
        return {"org_id": org}                     # narrow (or fill in) the boundary field

    layer = MemoryService.create(..., authorise=tenant_guard)
    layer.retrieve({"user_id": ANY}, "q", principal={"user": "ann", "org_id": "acme"})

The hook sees every call that names a scope (memorize, retrieve, evolve and the read-only
queries) with the caller's ``principal`` and the selector as given, before the scope model and
the boundary policy check it. It returns ``None`` (allowed as asked) or field values that
replace those fields of the selector (the others stay as asked); each may only narrow what was
asked (a value within the asked list, a list within it, anything where ANY or nothing was
asked), never widen it. It refuses by raising :class:`AccessDeniedError` with the field. The
boundary policy then applies to the result as to any selector.

A layer file names its hook as an importable dotted path, ``authorise = "package.module:function"``
(:func:`import_hook`); memoir's MCP tools and CLI pass who is calling as ``principal`` (see
docs/memory-layer.md, "Authorisation before selector expansion").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from memory_core.errors import ConfigError, InvalidInputError
from memory_core.pipeline.scopes import ANY, ScopeSelector

__all__ = [
    "AccessDeniedError",
    "AccessRequest",
    "Authorise",
    "Operation",
    "authorised_selector",
    "import_hook",
]

Operation = Literal[
    "memorize", "retrieve", "evolve", "list_categories", "get_category", "get_latest_intention"
]


@dataclass(frozen=True)
class AccessRequest:
    """What the hook judges: the call, the selector as the caller gave it, and who asks."""

    operation: Operation
    selector: ScopeSelector
    principal: Any


Authorise = Callable[[AccessRequest], Mapping[str, Any] | ScopeSelector | None]
"""The hook: ``None`` to allow as asked, field values to narrow, or raise
:class:`AccessDeniedError` to refuse."""


class AccessDeniedError(InvalidInputError):
    """The authorisation hook refused a scope field to this principal."""

    code = "access_denied"

    def __init__(self, field: str, reason: str, *, hint: str | None = None) -> None:
        super().__init__(
            f"access denied on scope field {field!r}: {reason}",
            hint=hint or f"ask for a value of {field!r} this principal may use",
            details={"field": field},
        )
        self.field = field


def _allowed(value: Any) -> frozenset[str] | None:
    """The set of values a selector value admits (None: any)."""
    if value is ANY:
        return None
    return frozenset((value,) if isinstance(value, str) else value)


def authorised_selector(
    hook: Authorise | None, operation: Operation, selector: ScopeSelector, principal: Any
) -> ScopeSelector:
    """The selector after the hook: as asked, or narrowed by it.

    Raises:
        AccessDeniedError: the hook refused (raised by the hook, naming the field).
        ConfigError: the hook returned something that widens a field or is not field values.
    """
    if hook is None:
        return selector
    returned = hook(AccessRequest(operation, selector, principal))
    if returned is None:
        return selector
    if not isinstance(returned, (ScopeSelector, Mapping)):
        raise ConfigError(
            f"the authorisation hook returned {returned!r} for {operation}",
            hint="return None (allow as asked), a mapping of field values, or a ScopeSelector; "
            "raise AccessDeniedError to refuse",
        )
    narrowing = returned if isinstance(returned, ScopeSelector) else ScopeSelector(returned)
    for name, value in narrowing.values.items():
        if name not in selector.values:
            continue  # nothing asked: the hook fills it in
        asked, given = _allowed(selector.values[name]), _allowed(value)
        if asked is not None and (given is None or not given <= asked):
            raise ConfigError(
                f"the authorisation hook widened scope field {name!r} for {operation} from "
                f"{ScopeSelector({name: selector.values[name]}).describe()[name]!r} to "
                f"{narrowing.describe()[name]!r}",
                hint="a hook may only narrow what was asked; raise AccessDeniedError to refuse",
            )
    return ScopeSelector({**selector.values, **narrowing.values})


def import_hook(dotted: str, *, source: str = "authorise") -> Authorise:
    """The hook named ``"package.module:function"`` (``package.module.function`` also reads),
    imported from this process's Python path.

    Raises:
        ConfigError: the path is not of that form, its module cannot be imported, it has no
            such attribute, or the attribute is not callable.
    """
    module_name, sep, attribute = dotted.strip().partition(":")
    if not sep:
        module_name, _, attribute = module_name.rpartition(".")
    example = 'e.g. authorise = "myapp.memory_auth:tenant_guard"'
    if not module_name or not attribute:
        raise ConfigError(
            f"{source} = {dotted!r} is not an importable path of the form 'package.module:function'",
            hint=example,
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure of the user's module is this one error
        raise ConfigError(
            f"{source} = {dotted!r}: module {module_name!r} cannot be imported "
            f"({type(exc).__name__}: {exc})",
            hint="install the package, or put its folder on PYTHONPATH for the process that "
            f"opens the layer; {example}",
        ) from exc
    hook = getattr(module, attribute, None)
    if hook is None or not callable(hook):
        found = "nothing" if hook is None else f"a {type(hook).__name__}"
        raise ConfigError(
            f"{source} = {dotted!r}: {module_name!r} has {found} named {attribute!r}, "
            "not a function",
            hint="name a function taking an AccessRequest; " + example,
        )
    return hook  # type: ignore[no-any-return]
