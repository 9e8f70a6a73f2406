"""The lexical index on PostgreSQL: ``item_lexical`` (tsvector + GIN) ranked by BM25 in SQL.

``ts_rank`` is not BM25 (no inverse document frequency, no length normalisation against the
average), and ranks well below FTS5 on the same data. So the write paths keep term statistics
(``lexical_term``: rows per term; ``lexical_stats``: rows and summed length; both split into
slots that writers update and readers sum, migration 0002) and the search
computes Okapi BM25 exactly as FTS5's ``bm25()`` does (k1 = 1.2, b = 0.75, IDF
``ln((N - n + 0.5) / (n + 0.5))`` floored at 1e-6, one document = text + tags). The GIN index
finds the matching rows; scope, kinds and filter are applied in the same statement, so a
selective filter never starves the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from memory_core.filters import Filter
from memory_core.kinds import ItemKind
from memory_core.models import ScoredId
from memory_core.scope import Scope
from memory_core.storage.ports import LexicalQuery
from memory_core.storage.postgres.filter_sql import compile_filter, scope_kind_where
from memory_core.storage.postgres.items import TS_CONFIG

__all__ = ["PgLexical"]

_K1 = 1.2
_B = 0.75


class PgLexical:
    """:class:`~memory_core.storage.ports.LexicalIndex` on one PostgreSQL connection."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def _lexemes(self, terms: Sequence[str]) -> list[tuple[str, list[str]]]:
        """Each distinct non-blank term with its lexemes (stemmed as the documents are)."""
        unique = [t for t in dict.fromkeys(terms) if t.strip()]
        if not unique:
            return []
        rows = self._conn.execute(
            f"SELECT t.term, tsvector_to_array(to_tsvector('{TS_CONFIG}', t.term)) "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS t(term, n) ORDER BY t.n",
            (unique,),
        ).fetchall()
        return [(str(r[0]), list(r[1])) for r in rows]

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
        terms = [(t, lx) for t, lx in self._lexemes(query.terms) if lx]
        if not terms or limit <= 0:
            return []
        # Each term is a phrase of its lexemes (as a quoted FTS5 string); terms join by the
        # operator. Built from parameters only: no text of the query becomes tsquery syntax.
        joiner = " && " if query.operator == "AND" else " || "
        tsquery = joiner.join(f"phraseto_tsquery('{TS_CONFIG}', %s)" for _ in terms)
        clause, params = scope_kind_where(scope.key if scope else None, list(kinds))
        join = ""
        if where is not None:
            compiled = compile_filter(where)
            join = "LEFT JOIN resource ON resource.resource_id = item.resource_id "
            clause += f" AND ({compiled.sql})"
            params.extend(compiled.params)
        lexemes = sorted({lx for _, lxs in terms for lx in lxs})
        sql = (
            "WITH st AS (SELECT sum(rows)::float8 AS n, "
            "greatest(sum(tokens)::float8 / greatest(sum(rows), 1), 1e-9) AS avgdl "
            "FROM lexical_stats), "
            "q AS (SELECT t.term, greatest(ln((st.n - lt.rows + 0.5) "
            "/ (lt.rows + 0.5)), 1e-6) AS idf "
            "FROM unnest(%s::text[]) AS t(term) CROSS JOIN st CROSS JOIN LATERAL "
            "(SELECT coalesce(sum(rows), 0)::float8 AS rows FROM lexical_term "
            "WHERE term = t.term) AS lt), "
            "hit AS MATERIALIZED (SELECT l.item_id, l.length, l.tsv FROM item_lexical AS l "
            f"JOIN item ON item.item_id = l.item_id {join}"
            f"WHERE l.tsv @@ ({tsquery}) AND {clause}) "
            "SELECT hit.item_id, sum(q.idf * (x.tf * %s) / (x.tf + %s * (1 - %s + %s * hit.length "
            "/ st.avgdl))) AS score "
            "FROM hit CROSS JOIN st CROSS JOIN LATERAL (SELECT u.lexeme, "
            "coalesce(array_length(u.positions, 1), 1)::float8 AS tf FROM unnest(hit.tsv) AS u) "
            "AS x JOIN q ON q.term = x.lexeme "
            "GROUP BY hit.item_id ORDER BY score DESC, hit.item_id LIMIT %s"
        )
        rows = self._conn.execute(
            sql,
            (
                lexemes,
                *(t for t, _ in terms),
                *params,
                _K1 + 1,
                _K1,
                _B,
                _B,
                int(limit),
            ),
        ).fetchall()
        return [ScoredId(int(r[0]), float(r[1])) for r in rows]

    def term_rows(self, terms: Sequence[str]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for term, lexemes in self._lexemes(terms):
            if not lexemes:
                counts[term] = 0
            elif len(lexemes) == 1:
                row = self._conn.execute(
                    "SELECT coalesce(sum(rows), 0) FROM lexical_term WHERE term = %s",
                    (lexemes[0],),
                ).fetchone()
                counts[term] = int(row[0]) if row else 0
            else:
                row = self._conn.execute(
                    "SELECT count(*) FROM item_lexical "
                    f"WHERE tsv @@ phraseto_tsquery('{TS_CONFIG}', %s)",
                    (term,),
                ).fetchone()
                counts[term] = int(row[0]) if row else 0
        return counts
