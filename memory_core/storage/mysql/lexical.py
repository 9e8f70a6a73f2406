"""The lexical index on MySQL / MariaDB: ``item_term`` ranked by BM25 in SQL.

The write paths keep term statistics (``lexical_term``: rows per term; ``lexical_stats``: rows
and summed length), and the search computes Okapi BM25 as FTS5's ``bm25()`` does (k1 = 1.2,
b = 0.75, IDF ``ln((N - n + 0.5) / (n + 0.5))`` floored at 1e-6, one document = text + tags).
Terms are tokenised as FTS5's unicode61 does, without stemming; positions are not kept, so a
term of several words matches the rows holding all of its words (FTS5: as a phrase). Scope,
kinds and filter are conditions of the same statement, so a filter never starves the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_core.filters import Filter
from memory_core.kinds import ItemKind
from memory_core.models import ScoredId
from memory_core.scope import Scope
from memory_core.storage.mysql.items import idf, tokens
from memory_core.storage.ports import LexicalQuery
from memory_core.storage.server.dialect import MYSQL
from memory_core.storage.server.filter_sql import compile_filter, scope_kind_where
from memory_core.storage.server.items import lexical_lengths

__all__ = ["MyLexical"]

_K1 = 1.2
_B = 0.75


class MyLexical:
    """:class:`~memory_core.storage.ports.LexicalIndex` on one MySQL / MariaDB connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def _rows(self, terms: Sequence[str]) -> dict[str, int]:
        where, params = MYSQL.in_list("term", list(terms))
        return {
            str(r[0]): int(r[1])
            for r in self._conn.execute(
                f"SELECT term, row_count FROM lexical_term WHERE {where}", params
            )
        }

    def search(
        self,
        query: LexicalQuery,
        scope: Scope | None,
        *,
        kinds: Sequence[ItemKind] = (),
        where: Filter | None = None,
        limit: int = 50,
    ) -> list[ScoredId]:
        if query.operator not in ("AND", "OR"):
            raise ValueError(f"operator must be AND or OR, not {query.operator!r}")
        words = sorted({w for term in query.terms for w in tokens(term)})
        if not words or limit <= 0:
            return []
        stats = self._conn.execute(
            "SELECT row_count, tokens FROM lexical_stats WHERE id = 1"
        ).fetchone()
        total, length = (int(stats[0]), int(stats[1])) if stats else (0, 0)
        avgdl = max(length / max(total, 1), 1e-9)
        found = self._rows(words)
        weights = " ".join("WHEN %s THEN %s" for _ in words)
        weight_params = [x for w in words for x in (w, idf(total, found.get(w, 0)))]
        clause, params = scope_kind_where(scope.key if scope else None, list(kinds))
        join = ""
        if where is not None:
            compiled = compile_filter(where, MYSQL)
            join = "LEFT JOIN resource ON resource.resource_id = item.resource_id "
            clause += f" AND ({compiled.sql})"
            params.extend(compiled.params)
        having = f"HAVING count(*) = {len(words)} " if query.operator == "AND" else ""
        rows = self._conn.execute(
            f"SELECT t.item_id, sum((CASE t.term {weights} END) * t.tf * %s "
            "/ (t.tf + %s * (1 - %s + %s * l.length / %s))) AS score "
            "FROM item_term AS t JOIN item_lexical AS l ON l.item_id = t.item_id "
            f"JOIN item ON item.item_id = t.item_id {join}"
            f"WHERE t.term IN %s AND {clause} GROUP BY t.item_id {having}"
            "ORDER BY score DESC, t.item_id LIMIT %s",
            (
                *weight_params,
                _K1 + 1,
                _K1,
                _B,
                _B,
                avgdl,
                tuple(words),
                *params,
                int(limit),
            ),
        ).fetchall()
        return [ScoredId(int(r[0]), float(r[1])) for r in rows]

    def term_frequencies(
        self, terms: Sequence[str], scope: Scope, *, kinds: Sequence[ItemKind] = ()
    ) -> dict[str, dict[int, int]]:
        clause, params = scope_kind_where(scope.key, list(kinds))
        postings: dict[str, dict[int, int]] = {}
        for term in dict.fromkeys(terms):
            if not term.strip():
                continue
            words = sorted(set(tokens(term)))
            if not words:
                postings[term] = {}
                continue
            # No positions: a term of several words is the rows holding every word, at the
            # frequency of its rarest one.
            rows = self._conn.execute(
                "SELECT t.item_id, min(t.tf) FROM item_term AS t "
                f"JOIN item ON item.item_id = t.item_id WHERE t.term IN %s AND {clause} "
                "GROUP BY t.item_id HAVING count(*) = %s",
                (tuple(words), *params, len(words)),
            ).fetchall()
            postings[term] = {int(r[0]): int(r[1]) for r in rows}
        return postings

    def lengths(self, scope: Scope, *, kinds: Sequence[ItemKind] = ()) -> dict[int, int]:
        return lexical_lengths(self._conn, *scope_kind_where(scope.key, list(kinds)))

    def term_rows(self, terms: Sequence[str]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            if not term.strip():
                continue
            words = sorted(set(tokens(term)))
            if len(words) <= 1:
                counts[term] = self._rows(words).get(words[0], 0) if words else 0
                continue
            row = self._conn.execute(
                "SELECT count(*) FROM (SELECT item_id FROM item_term WHERE term IN %s "
                "GROUP BY item_id HAVING count(*) = %s) AS m",
                (tuple(words), len(words)),
            ).fetchone()
            counts[term] = int(row[0]) if row else 0
        return counts
