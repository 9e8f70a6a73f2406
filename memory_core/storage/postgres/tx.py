"""One PostgreSQL transaction's view of the store: the repositories over one connection."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import psycopg

from memory_core.storage.postgres.categories import PgCategories
from memory_core.storage.postgres.graph import PgGraph
from memory_core.storage.postgres.items import PgItems
from memory_core.storage.postgres.lexical import PgLexical
from memory_core.storage.postgres.log_repo import PgLog, PgMeta, PgTombstones
from memory_core.storage.postgres.resources import PgResources
from memory_core.storage.postgres.vectors import PgVectors

__all__ = ["PgTx"]


class PgTx:
    """:class:`~memory_core.storage.ports.Tx` over one psycopg connection in a transaction."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    @cached_property
    def items(self) -> PgItems:
        return PgItems(self._conn)

    @cached_property
    def lexical(self) -> PgLexical:
        return PgLexical(self._conn)

    @cached_property
    def vectors(self) -> PgVectors:
        return PgVectors(self._conn)

    @cached_property
    def resources(self) -> PgResources:
        return PgResources(self._conn)

    @cached_property
    def graph(self) -> PgGraph:
        return PgGraph(self._conn)

    @cached_property
    def categories(self) -> PgCategories:
        return PgCategories(self._conn)

    @cached_property
    def log(self) -> PgLog:
        return PgLog(self._conn)

    @cached_property
    def tombstones(self) -> PgTombstones:
        return PgTombstones(self._conn)

    @cached_property
    def meta(self) -> PgMeta:
        return PgMeta(self._conn)
