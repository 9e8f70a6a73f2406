"""The read-only queries of the memory layer: list_categories, get_category, get_latest_intention."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from memory_core.errors import NotFoundError
from memory_core.pipeline.layer_ops import latest_intention
from memory_core.pipeline.service_state import ServiceState

__all__ = ["LayerQueries"]


class LayerQueries(ServiceState):
    """The read-only queries of one scope: its categories and its latest intention."""

    def list_categories(
        self,
        scope: BaseModel | Mapping[str, Any],
        *,
        include_summary: bool = True,
        include_items: bool = False,
        items_per_category: int = 20,
        principal: Any = None,
    ) -> list[dict[str, Any]]:
        """The taxonomy of one scope with counts (and summaries, anchors, items if asked).

        Raises:
            InvalidInputError: the scope misses a field.
            AccessDeniedError: the authorisation hook refused the scope to ``principal``.
        """
        full = self._authorised_scope("list_categories", scope, principal)
        return self._categories_of(full, include_summary, include_items, items_per_category)

    def _categories_of(
        self,
        full: dict[str, str],
        include_summary: bool,
        include_items: bool,
        items_per_category: int,
    ) -> list[dict[str, Any]]:
        rows = {
            r.category_key: r for r in self.store.categories({k: (v,) for k, v in full.items()})
        }
        items = self.store.items({k: (v,) for k, v in full.items()}) if include_items else []
        out = []
        for category in self.taxonomy:
            row = rows.get(category["key"])
            entry: dict[str, Any] = {
                "category_key": category["key"],
                "name": category["name"],
                "item_count": row.item_count if row else 0,
            }
            if include_summary:
                entry["summary"] = row.summary if row else ""
                entry["anchor_ids"] = row.anchor_ids if row else []
            if include_items:
                entry["items"] = [
                    {"item_id": i.item_id, "text": i.text, "confidence": i.confidence}
                    for i in items
                    if i.category_key == category["key"]
                ][:items_per_category]
            out.append(entry)
        return out

    def get_category(
        self,
        scope: BaseModel | Mapping[str, Any],
        category: str,
        *,
        items: int = 50,
        principal: Any = None,
    ) -> dict[str, Any]:
        """One category of one scope (by key or name) with its summary, anchors and items.

        Raises:
            InvalidInputError: the scope misses a field.
            AccessDeniedError: the authorisation hook refused the scope to ``principal``.
            NotFoundError: no such category in the taxonomy.
        """
        wanted = category.strip().lower()
        found = [c for c in self.taxonomy if wanted in (c["key"], c["name"].lower())]
        if not found:
            raise NotFoundError(
                f"no category {category!r} in the taxonomy",
                hint="use one of " + ", ".join(c["key"] for c in self.taxonomy),
            )
        key = found[0]["key"]
        full = self._authorised_scope("get_category", scope, principal)
        entries = self._categories_of(full, True, True, items)
        return next(e for e in entries if e["category_key"] == key)

    def get_latest_intention(
        self, scope: BaseModel | Mapping[str, Any], *, principal: Any = None
    ) -> dict[str, Any] | None:
        """The newest intention (goals, constraints, progress, version) of one scope, or None.

        Raises:
            InvalidInputError: the scope misses a field.
            AccessDeniedError: the authorisation hook refused the scope to ``principal``.
        """
        full = self._authorised_scope("get_latest_intention", scope, principal)
        return latest_intention(self.store, full)
