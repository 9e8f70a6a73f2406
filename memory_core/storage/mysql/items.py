"""Items on MySQL / MariaDB: the shared server repository with a term-table lexical row and a
float32 blob vector row (see :mod:`memory_core.storage.mysql.schema`)."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from memory_core.storage.mysql.porter import stem
from memory_core.storage.server.dialect import MYSQL
from memory_core.storage.server.items import (
    INSERT_COLUMNS,
    INSERT_MARKS,
    VECTOR_GENERATION_KEY,
    ServerItems,
)

__all__ = ["EMBEDDING_DIM_KEY", "MyItems", "bump_vector_generation", "meta_value", "tokens"]

EMBEDDING_DIM_KEY = "embedding_dim"
_WORD = re.compile(r"[^\W_]+")
_MAX_TERM = 191  # the term column's width


def tokens(text: str) -> list[str]:
    """The terms of ``text`` as FTS5's ``porter unicode61`` tokenizer makes them (lower case,
    letters and digits, diacritics removed, Porter-stemmed)."""
    folded = unicodedata.normalize("NFKD", text.lower())
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return [stem(t)[:_MAX_TERM] for t in _WORD.findall(folded)]


def meta_value(conn: Any, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE `key` = %s", (key,)).fetchone()
    return None if row is None else str(row[0])


def bump_vector_generation(conn: Any, scope_keys: Iterable[str]) -> None:
    """Mark vectors changed, store-wide and per scope (caches key on it)."""
    keys = sorted({VECTOR_GENERATION_KEY, *(f"{VECTOR_GENERATION_KEY}:{k}" for k in scope_keys)})
    conn.execute(
        "INSERT INTO meta (`key`, value) VALUES "
        + ",".join(["(%s, '1')"] * len(keys))
        + " ON DUPLICATE KEY UPDATE value = CAST(value AS UNSIGNED) + 1",
        keys,
    )


class MyItems(ServerItems):
    """:class:`~memory_core.storage.ports.ItemRepository` on one MySQL / MariaDB connection."""

    dialect = MYSQL

    def _insert_rows(self, rows: list[tuple[Any, ...]]) -> dict[int, int]:
        new: dict[int, int] = {}
        for index, row in enumerate(rows):
            # Only a duplicate uid is skipped (a no-op update, 0 rows affected): INSERT IGNORE
            # would also swallow a foreign-key failure (a category deleted meanwhile), and the
            # item would silently not exist.
            cursor = self._conn.execute(
                f"INSERT INTO {INSERT_COLUMNS} VALUES {INSERT_MARKS} "
                "ON DUPLICATE KEY UPDATE item_id = item_id",
                row,
            )
            if cursor.rowcount == 1:
                new[index] = int(cursor.lastrowid)
        return new

    def lexical_add(self, item_ids: Sequence[int]) -> None:
        if not item_ids:
            return
        where, params = self._in("item_id", list(item_ids))
        documents = {
            int(r[0]): Counter(tokens(f"{r[1]} {' '.join(json.loads(r[2]))}"))
            for r in self._conn.execute(
                f"SELECT item_id, text, tags FROM item WHERE {where}", params
            )
        }
        self.dialect.executemany(
            self._conn,
            "INSERT INTO item_lexical (item_id, length) VALUES (%s, %s)",
            [(i, sum(c.values())) for i, c in documents.items()],
        )
        self.dialect.executemany(
            self._conn,
            "INSERT INTO item_term (term, item_id, tf) VALUES (%s, %s, %s)",
            [(t, i, n) for i, c in documents.items() for t, n in c.items()],
        )
        self._term_stats(
            Counter(t for c in documents.values() for t in c),
            len(documents),
            sum(sum(c.values()) for c in documents.values()),
        )

    def lexical_remove(self, item_ids: Sequence[int]) -> None:
        if not item_ids:
            return
        where, params = self._in("item_id", list(item_ids))
        terms = Counter(
            {
                str(r[0]): -int(r[1])
                for r in self._conn.execute(
                    f"SELECT term, count(*) FROM item_term WHERE {where} GROUP BY term", params
                )
            }
        )
        row = self._conn.execute(
            f"SELECT count(*), coalesce(sum(length), 0) FROM item_lexical WHERE {where}", params
        ).fetchone()
        self._term_stats(terms, -int(row[0]), -int(row[1]))
        self._conn.execute(f"DELETE FROM item_term WHERE {where}", params)
        self._conn.execute(f"DELETE FROM item_lexical WHERE {where}", params)

    def _term_stats(self, terms: Counter[str], rows: int, length: int) -> None:
        # Terms are locked in one order by every writer, so two writers never deadlock on them.
        self.dialect.executemany(
            self._conn,
            "INSERT INTO lexical_term (term, row_count) VALUES (%s, %s) "
            "ON DUPLICATE KEY UPDATE row_count = row_count + VALUES(row_count)",
            sorted(terms.items()),
        )
        if rows:
            self._conn.execute(
                "UPDATE lexical_stats SET row_count = row_count + %s, tokens = tokens + %s "
                "WHERE id = 1",
                (rows, length),
            )

    def vector_dimension(self) -> int | None:
        value = meta_value(self._conn, EMBEDDING_DIM_KEY)
        return None if value is None else int(value)

    def _vector_param(self, array: np.ndarray) -> Any:
        return array.astype("<f4").tobytes()

    def bump_vector_generation(self, scope_keys: Iterable[str]) -> None:
        bump_vector_generation(self._conn, scope_keys)


def idf(total_rows: int, term_rows: int) -> float:
    """FTS5's BM25 inverse document frequency, floored at 1e-6."""
    return max(math.log((total_rows - term_rows + 0.5) / (term_rows + 0.5)), 1e-6)
