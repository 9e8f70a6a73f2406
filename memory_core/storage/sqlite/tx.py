"""One SQLite transaction's view of the store: the repositories over one connection."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from memory_core.storage.sqlite.categories import SqliteCategories
from memory_core.storage.sqlite.graph import SqliteGraph
from memory_core.storage.sqlite.items import SqliteItems
from memory_core.storage.sqlite.lexical import SqliteLexical
from memory_core.storage.sqlite.log_repo import SqliteLog, SqliteTombstones
from memory_core.storage.sqlite.meta_repo import SqliteMeta
from memory_core.storage.sqlite.resources import SqliteResources
from memory_core.storage.sqlite.vectors import SqliteVectors

__all__ = ["SqliteTx"]


class SqliteTx:
    """:class:`~memory_core.storage.ports.Tx` over one DB-API connection (repositories are made
    on first use: most transactions touch one or two of them)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    @cached_property
    def items(self) -> SqliteItems:
        return SqliteItems(self._conn)

    @cached_property
    def lexical(self) -> SqliteLexical:
        return SqliteLexical(self._conn)

    @cached_property
    def vectors(self) -> SqliteVectors:
        return SqliteVectors(self._conn)

    @cached_property
    def resources(self) -> SqliteResources:
        return SqliteResources(self._conn)

    @cached_property
    def graph(self) -> SqliteGraph:
        return SqliteGraph(self._conn)

    @cached_property
    def categories(self) -> SqliteCategories:
        return SqliteCategories(self._conn)

    @cached_property
    def log(self) -> SqliteLog:
        return SqliteLog(self._conn)

    @cached_property
    def tombstones(self) -> SqliteTombstones:
        return SqliteTombstones(self._conn)

    @cached_property
    def meta(self) -> SqliteMeta:
        return SqliteMeta(self._conn)
