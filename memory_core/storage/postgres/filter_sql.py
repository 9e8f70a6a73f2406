"""Filters on PostgreSQL: the shared server compiler (:mod:`memory_core.storage.server.filter_sql`)
in the PostgreSQL dialect."""

from __future__ import annotations

from memory_core.filters import Filter
from memory_core.storage.server import filter_sql as _server
from memory_core.storage.server.dialect import POSTGRES
from memory_core.storage.server.filter_sql import CompiledFilter, scope_kind_where

__all__ = ["CompiledFilter", "compile_filter", "order_column", "scope_kind_where"]


def compile_filter(node: Filter) -> CompiledFilter:
    """The PostgreSQL fragment and parameters of ``node`` (see the shared compiler)."""
    return _server.compile_filter(node, POSTGRES)


def order_column(name: str) -> str:
    """The PostgreSQL expression of a catalog field, for ORDER BY."""
    return _server.order_column(name, POSTGRES)
