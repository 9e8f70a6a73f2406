"""User-defined scopes and cross-scope selectors (seed 004 §5, §7). Pure.

A :class:`ScopeSpec` is read from the user's pydantic ``scope_model``: its fields, in order,
become the scope columns. A write names every field exactly (:meth:`ScopeSpec.scope`); a read
takes a :class:`ScopeSelector` (exact, IN or :data:`ANY` per field) that the
:class:`SelectorPolicy` checks and turns into the store's filter: boundary fields must be exact
or IN, and the IN lists may expand to at most ``max_combinations`` scopes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel

from memory_core.errors import ConfigError, InvalidInputError, LimitExceededError
from memory_core.scope import ScopeSchema, validate_scope
from memory_core.storage.layer import RESERVED_COLUMNS, ScopeFilter

__all__ = ["ANY", "ScopeSelector", "ScopeSpec", "SelectorPolicy"]


class _Any:
    _instance: _Any | None = None

    def __new__(cls) -> _Any:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ANY"


ANY: Final = _Any()
"""Selector value that crosses a column (never allowed on a boundary field)."""


@dataclass(frozen=True)
class ScopeSpec:
    """The scope schema of a service: field names in order and their declared types."""

    fields: tuple[str, ...]
    types: tuple[str, ...]

    @classmethod
    def from_model(cls, model: type[BaseModel]) -> ScopeSpec:
        """Read the fields of a pydantic scope model.

        Raises:
            ConfigError: not a pydantic model, no fields, or a field name that cannot be a column.
        """
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ConfigError(
                f"scope_model must be a pydantic model class, got {model!r}",
                hint="declare e.g. class Scope(BaseModel): org_id: str; project_id: str",
            )
        names = tuple(model.model_fields)
        try:
            ScopeSchema(names)
        except InvalidInputError as exc:
            raise ConfigError(exc.message, hint=exc.hint) from exc
        clash = sorted(set(names) & RESERVED_COLUMNS)
        if clash:
            raise ConfigError(
                f"scope field names {clash} collide with the layer's own columns",
                hint="rename those fields in the scope model (e.g. add an _id suffix)",
            )
        types = tuple(
            getattr(info.annotation, "__name__", str(info.annotation))
            for info in model.model_fields.values()
        )
        return cls(names, types)

    @property
    def schema_hash(self) -> str:
        payload = json.dumps(list(zip(self.fields, self.types, strict=True)))
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def describe(self) -> list[dict[str, str]]:
        return [{"name": n, "type": t} for n, t in zip(self.fields, self.types, strict=True)]

    def scope(self, value: BaseModel | Mapping[str, Any]) -> dict[str, str]:
        """A full scope (every field, exactly) for a write or a single-scope read.

        Raises:
            InvalidInputError: a field is missing or unknown, or a value is empty or malformed.
        """
        raw = value.model_dump() if isinstance(value, BaseModel) else dict(value)
        missing = [f for f in self.fields if raw.get(f) is None]
        unknown = sorted(set(raw) - set(self.fields))
        if missing or unknown:
            raise InvalidInputError(
                f"scope {_short(raw)} does not match the scope model {list(self.fields)}: "
                f"missing {missing}, unknown {unknown}",
                hint="pass every scope field with one value (use retrieve with a ScopeSelector "
                "to read across scopes)",
            )
        out: dict[str, str] = {}
        for name in self.fields:
            item = raw[name]
            if isinstance(item, (list, tuple, set, _Any)):
                raise InvalidInputError(
                    f"scope field {name!r} has the multi-value {item!r}",
                    hint="a write names one value per field; only retrieve accepts IN and ANY",
                )
            out[name] = validate_scope(str(item))
        return out


def _short(raw: Mapping[str, Any]) -> str:
    text = json.dumps({k: str(v) for k, v in raw.items()})
    return text if len(text) <= 200 else text[:197] + "..."


@dataclass(frozen=True)
class ScopeSelector:
    """Exact, IN or ANY per scope field: ``ScopeSelector(org_id="o1", project_id=["p1", "p2"],
    agent_id=ANY)``. Every field must be named (ANY crosses it explicitly)."""

    values: Mapping[str, str | tuple[str, ...] | _Any] = field(default_factory=dict)

    def __init__(self, values: Mapping[str, Any] | None = None, **fields: Any) -> None:
        merged = {**(values or {}), **fields}
        norm: dict[str, str | tuple[str, ...] | _Any] = {}
        for name, value in merged.items():
            if value is ANY or value == "*":
                norm[name] = ANY
            elif isinstance(value, (list, tuple, set, frozenset)):
                norm[name] = tuple(sorted({str(v) for v in value}))
            else:
                norm[name] = str(value)
        object.__setattr__(self, "values", norm)

    @classmethod
    def exact(cls, scope: Mapping[str, Any] | BaseModel) -> ScopeSelector:
        raw = scope.model_dump() if isinstance(scope, BaseModel) else dict(scope)
        return cls(raw)

    def describe(self) -> dict[str, Any]:
        """JSON form for run logs: a value, a list (IN) or ``"ANY"``."""
        return {
            k: ("ANY" if v is ANY else list(v) if isinstance(v, tuple) else v)
            for k, v in self.values.items()
        }


@dataclass(frozen=True)
class SelectorPolicy:
    """The cross-scope policy (§7.2): boundary fields, the combination cap, candidate caps."""

    boundary_fields: tuple[str, ...]
    max_combinations: int = 64
    max_vector_top_k: int = 200
    max_rerank_candidates: int = 50
    max_vector_scan_items: int = 200_000

    def check(self, spec: ScopeSpec) -> None:
        """Raises ConfigError: a boundary field is not a scope field, or a cap is not positive."""
        if not self.boundary_fields:
            raise ConfigError(
                "no boundary field declared",
                hint=f"pass boundary_fields with at least one of {list(spec.fields)}",
            )
        unknown = [f for f in self.boundary_fields if f not in spec.fields]
        if unknown:
            raise ConfigError(
                f"boundary fields {unknown} are not scope fields {list(spec.fields)}",
                hint="name boundary fields from the scope model",
            )
        for name in ("max_combinations", "max_vector_top_k", "max_rerank_candidates"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive", hint=f"set {name} to e.g. 50")

    def compile(self, spec: ScopeSpec, selector: ScopeSelector | Mapping[str, Any]) -> ScopeFilter:
        """The store filter for ``selector``, after the policy's checks.

        Raises:
            InvalidInputError: a field is missing or unknown, a boundary field is ANY, or an IN
                list is empty.
            LimitExceededError: the IN lists expand to more than ``max_combinations`` scopes.
        """
        sel = selector if isinstance(selector, ScopeSelector) else ScopeSelector(selector)
        missing = [f for f in spec.fields if f not in sel.values]
        unknown = sorted(set(sel.values) - set(spec.fields))
        if missing or unknown:
            raise InvalidInputError(
                f"scope selector {sel.describe()} does not match the scope model "
                f"{list(spec.fields)}: missing {missing}, unknown {unknown}",
                hint="name every scope field: a value, a list (IN) or ANY to cross it",
            )
        out: dict[str, tuple[str, ...] | None] = {}
        combinations = 1
        for name in spec.fields:
            value = sel.values[name]
            if value is ANY:
                if name in self.boundary_fields:
                    raise InvalidInputError(
                        f"scope selector crosses the boundary field {name!r} with ANY",
                        hint=f"give {name!r} one value or a list of values; boundary fields "
                        f"{list(self.boundary_fields)} are never wildcards",
                    )
                out[name] = None
                continue
            values = (value,) if isinstance(value, str) else tuple(value)  # type: ignore[arg-type]
            if not values:
                raise InvalidInputError(
                    f"scope selector gives field {name!r} an empty list",
                    hint="give at least one value, or ANY on a non-boundary field",
                )
            out[name] = tuple(validate_scope(v) for v in values)
            combinations *= len(values)
        if combinations > self.max_combinations:
            raise LimitExceededError(
                "scope selector's expanded scope combinations",
                value=combinations,
                limit=self.max_combinations,
                setting="max_combinations",
                hint="narrow the IN lists, or pass a larger max_combinations to "
                "MemoryService.create",
            )
        return out


def boundary_combinations(selector: ScopeFilter, fields: Iterable[str]) -> int:
    total = 1
    for name in fields:
        allowed = selector.get(name)
        total *= 1 if allowed is None else len(allowed)
    return total
