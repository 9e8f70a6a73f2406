"""Creation-time values and checks of the memory layer: the taxonomy, version hashes, the role
profiles, and the scope model of a reopened store."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from memory_core.errors import ConfigError, ScopeMismatchError
from memory_core.pipeline.scopes import ScopeSpec

__all__ = [
    "DDL_VERSION",
    "check_reopened_scope",
    "check_role_profiles",
    "scope_difference",
    "taxonomy_from",
    "version_hash",
]

DDL_VERSION = 2  # 2: category centroid sums (layer_category_sum)
_SLUG = re.compile(r"[^a-z0-9]+")


def taxonomy_from(categories: Sequence[str | Mapping[str, str]]) -> list[dict[str, str]]:
    if not categories:
        raise ConfigError(
            "categories is empty", hint="pass the taxonomy, e.g. ['preferences', 'projects']"
        )
    out: list[dict[str, str]] = []
    for entry in categories:
        raw = {"name": entry} if isinstance(entry, str) else dict(entry)
        name = str(raw.get("name") or raw.get("key") or "").strip()
        if not name:
            raise ConfigError(f"category {entry!r} has no name", hint="give each a name")
        key = str(raw.get("key") or _SLUG.sub("_", name.lower()).strip("_"))
        out.append({"key": key, "name": name, "description": str(raw.get("description", ""))})
    keys = [c["key"] for c in out]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"category keys repeat: {keys}", hint="give each category its own key")
    return out


def version_hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def scope_difference(stored: Mapping[str, Any], spec: ScopeSpec) -> str:
    old = [f["name"] for f in stored["scope_fields"]]
    new = list(spec.fields)
    added = [f for f in new if f not in old]
    removed = [f for f in old if f not in new]
    parts = [f"stored fields {old}, given {new}"]
    if added:
        parts.append(f"added {added}")
    if removed:
        parts.append(f"removed {removed}")
    if not added and not removed and old != new:
        parts.append("same fields in another order")
    old_types = {f["name"]: f["type"] for f in stored["scope_fields"]}
    retyped = [f"{n}: {old_types[n]} -> {t}" for n, t in zip(new, spec.types, strict=True)
               if n in old_types and old_types[n] != t]  # fmt: skip
    if retyped:
        parts.append(f"retyped {retyped}")
    return "; ".join(parts)


def check_role_profiles(roles: Mapping[str, str], profiles: Mapping[str, Any]) -> None:
    """Every role maps to a defined profile.

    Raises:
        ConfigError: a role names a profile ``llm_providers`` does not define.
    """
    for role, name in roles.items():
        if name not in profiles:
            raise ConfigError(
                f"role_profiles maps role {role!r} to the undefined profile {name!r}",
                hint=f"define it in llm_providers (profiles: {sorted(profiles)})",
            )


def check_reopened_scope(stored: Mapping[str, Any] | None, spec: ScopeSpec) -> None:
    """A store opened again (its ``service_meta`` is ``stored``) keeps its scope model.

    Raises:
        ScopeMismatchError: the store was created with another scope model.
    """
    if stored is not None and stored.get("scope_schema_hash") != spec.schema_hash:
        raise ScopeMismatchError(
            f"this store was created with another scope model: {scope_difference(stored, spec)}",
            hint="open it with the scope model it was created with; to change scope fields, "
            "create a new store and memorize into it again (scopes are never migrated)",
            details={"stored": stored["scope_fields"], "given": spec.describe()},
        )
