"""The lexical index on PostgreSQL: ``item_lexical`` (tsvector) and ``lexical_posting`` (a row
per term and item), ranked by BM25 in SQL.

``ts_rank`` is not BM25 (no inverse document frequency, no length normalisation against the
average), and ranks well below FTS5 on the same data. So the write paths keep term statistics
(``lexical_term``: rows per term; ``lexical_stats``: rows and summed length; both split into
slots that writers update and readers sum, migration 0002) and the search
computes Okapi BM25 exactly as FTS5's ``bm25()`` does (k1 = 1.2, b = 0.75, IDF
``ln((N - n + 0.5) / (n + 0.5))`` floored at 1e-6, one document = text + tags). The score is
read from the postings of the query's lexemes only (term frequency, document length, scope,
kind and deleted flag on each, migration 0004); the tsvector only checks phrases. Scope, kinds
and filter are applied in the same statement, so a selective filter never starves the result.
"""

from __future__ import annotations

import math
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


def _idf(counts: dict[str, float], total: float) -> dict[str, float]:
    """BM25 IDF per lexeme from the rows holding it, as ``_scored``'s SQL computes it (the
    pruning bound's margin covers a last-bit difference between the two ``ln``s)."""
    return {
        lexeme: max(math.log((total - rows + 0.5) / (rows + 0.5)), 1e-6)
        for lexeme, rows in counts.items()
    }


class PgLexical:
    """:class:`~memory_core.storage.ports.LexicalIndex` on one PostgreSQL connection."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def _lexemes(self, terms: Sequence[str]) -> list[tuple[str, list[str]]]:
        """Each distinct non-blank term with its lexemes (stemmed as the documents are)."""
        return [(term, lexemes) for term, lexemes, _ in self._analyse(terms)[0]]

    def _analyse(
        self, terms: Sequence[str]
    ) -> tuple[list[tuple[str, list[str], list[float]]], float]:
        """Each distinct non-blank term with its lexemes and, per lexeme, the rows holding
        it; and the rows of the index (counters summed over their slots). One statement
        for everything the search needs before it scores."""
        unique = [t for t in dict.fromkeys(terms) if t.strip()]
        if not unique:
            return [], 0.0
        rows = self._conn.execute(
            "SELECT t.term, t.lx, ARRAY(SELECT (SELECT coalesce(sum(rows), 0)::float8 "
            "FROM lexical_term WHERE term = u.lexeme) FROM unnest(t.lx) WITH ORDINALITY "
            "AS u(lexeme, i) ORDER BY u.i), "
            "(SELECT coalesce(sum(rows), 0)::float8 FROM lexical_stats) "
            f"FROM (SELECT t.term, t.n, tsvector_to_array(to_tsvector('{TS_CONFIG}', t.term)) "
            "AS lx FROM unnest(%s::text[]) WITH ORDINALITY AS t(term, n)) AS t ORDER BY t.n",
            (unique,),
        ).fetchall()
        total = float(rows[0][3]) if rows else 0.0
        return [(str(r[0]), list(r[1]), [float(c) for c in r[2]]) for r in rows], total

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
        analysed, total = self._analyse(query.terms)
        analysed = [(t, lx, rows) for t, lx, rows in analysed if lx]
        if not analysed or limit <= 0:
            return []
        terms = [(t, lx) for t, lx, _ in analysed]
        counts = {lx: n for _, lxs, ns in analysed for lx, n in zip(lxs, ns, strict=True)}
        if query.operator == "AND" and min(counts.values()) == 0:
            return []  # a lexeme in no row: no row holds every term
        lexemes = sorted(counts)
        if query.operator == "OR" and len(terms) > 1:
            pruned = self._or_without_common_terms(
                terms, lexemes, _idf(counts, total), scope, kinds, where, limit, counts=counts
            )
            if pruned is not None:
                return pruned
        return self._scored(
            terms, lexemes, query.operator, scope, kinds, where, limit, counts=counts
        )

    def _or_without_common_terms(
        self,
        terms: list[tuple[str, list[str]]],
        lexemes: list[str],
        idf: dict[str, float],
        scope: Scope | None,
        kinds: Sequence[ItemKind],
        where: Filter | None,
        limit: int,
        *,
        counts: dict[str, float] | None = None,
    ) -> list[ScoredId] | None:
        """The OR query's exact top ``limit`` found without matching its commonest terms, or
        None when that cannot be proven (MaxScore pruning).

        A term in most rows has an IDF near zero, yet matching it makes the statement score
        nearly every row (a 2-term OR query with a word in 90 % of 100k chunks: seconds). A
        row can score at most ``(k1 + 1) * idf`` per term, so when the rows matching the rarer
        terms (scored on every term) already hold ``limit`` rows above the bound of the
        common terms, no row matching only common terms can enter the top ``limit``: the
        result is the full query's, row for row.
        """
        # Only one-lexeme terms can be left out of the match: a row that does not match a
        # longer phrase may still hold some of its lexemes, and they would add to its score.
        single = sorted((idf.get(lxs[0], 0.0), t, lxs) for t, lxs in terms if len(lxs) == 1)
        rarest = max(idf.get(lx, 0.0) for lx in lexemes)
        common: set[str] = set()
        total = 0.0
        # The commonest words while their summed bound stays under a third of the rarest one's.
        for value, term, _ in single:
            if len(common) == len(terms) - 1 or total + (_K1 + 1) * value > (_K1 + 1) * rarest / 3:
                break
            common.add(term)
            total += (_K1 + 1) * value
        if not common:
            return None
        essential = [(t, lxs) for t, lxs in terms if t not in common]
        # A row matching none of the essential terms holds none of the essential one-lexeme
        # terms, but may hold some lexemes of an essential phrase: it scores at most the
        # bound of every other lexeme.
        sure = {lxs[0] for t, lxs in essential if len(lxs) == 1}
        total = sum((_K1 + 1) * idf.get(lx, 0.0) for lx in lexemes if lx not in sure)
        hits = self._scored(
            terms, lexemes, "OR", scope, kinds, where, limit, match=essential, counts=counts
        )
        # The margin covers float rounding between the bound and the statement's sums.
        if len(hits) >= limit and hits[limit - 1].score > total * (1 + 1e-9) + 1e-12:
            return hits
        return None

    def _scored(
        self,
        terms: list[tuple[str, list[str]]],
        lexemes: list[str],
        operator: str,
        scope: Scope | None,
        kinds: Sequence[ItemKind],
        where: Filter | None,
        limit: int,
        *,
        match: list[tuple[str, list[str]]] | None = None,
        counts: dict[str, float] | None = None,
    ) -> list[ScoredId]:
        """BM25 over every lexeme of ``terms`` for the rows matching ``match`` (default:
        ``terms``) joined by ``operator``, from the postings of those lexemes (migration 0004).

        The candidates are the rows holding a *driving* lexeme: for AND the rarest lexeme of
        all (a match holds every one), for OR the rarest lexeme of each matched term (a row
        matching a term holds all of its lexemes); without ``counts`` every lexeme of the
        matched terms drives. When the drivers are every lexeme, their postings are the
        whole score and are read once; otherwise each candidate's postings of the other
        lexemes are read by primary key. A row then matches a term when it holds all of the
        term's lexemes and, for a term that is more than one word (a phrase, as FTS5 quotes
        it), its tsvector matches the phrase.

        Each row's terms are summed in term order (the tsvector's, bytewise), whatever plan
        the planner picks, so every statement gives a row the same score to the last bit,
        and the score the tsvector statement before 0004 gave it.
        """
        matched = terms if match is None else match
        if counts is None:
            drivers = sorted({lx for _, lxs in matched for lx in lxs})
        elif operator == "AND":
            drivers = [min((counts.get(lx, 0.0), lx) for _, lxs in matched for lx in lxs)[1]]
        else:
            drivers = sorted(
                {min((counts.get(lx, 0.0), lx) for lx in lxs)[1] for _, lxs in matched}
            )
        # Scope, kind and deleted are on the posting: item is read only for a filter, whose
        # fields live on item and resource.
        clause, params = scope_kind_where(scope.key if scope else None, list(kinds), table="p")
        score = (
            "sum(q.idf * (p.tf::float8 * %s) / (p.tf::float8 + %s * (1 - %s + %s * p.length "
            "/ st.avgdl)) ORDER BY p.term) AS score, array_agg(p.term) AS present"
        )
        weights = [_K1 + 1, _K1, _B, _B]
        if set(drivers) == set(lexemes):
            # Term at a time: the postings of the query's lexemes are the whole score.
            scored = (
                f"SELECT p.item_id, {score} FROM lexical_posting AS p "
                "JOIN q ON q.term = p.term CROSS JOIN st "
                f"WHERE p.term = ANY(%s::text[]) AND {clause} GROUP BY p.item_id"
            )
            scored_params: list[Any] = [*weights, lexemes, *params]
        else:
            scored = (
                "SELECT c.item_id, "
                f"{score} FROM (SELECT DISTINCT p.item_id FROM lexical_posting AS p "
                f"WHERE p.term = ANY(%s::text[]) AND {clause}) AS c "
                "CROSS JOIN q CROSS JOIN st JOIN lexical_posting AS p "
                "ON p.term = q.term AND p.item_id = c.item_id GROUP BY c.item_id"
            )
            scored_params = [*weights, drivers, *params]
        # A term matches when the row holds its lexemes and, unless the term is one lexeme
        # once (phraseto_tsquery of one node), its tsvector matches the phrase. Built from
        # parameters only: no text of the query becomes tsquery syntax.
        phrases = ", ".join(
            f"phraseto_tsquery('{TS_CONFIG}', %s) AS q{i}" for i in range(len(matched))
        )
        tests = []
        for i in range(len(matched)):
            tests.append(
                f"(s.present @> %s::text[] AND (numnode(ph.q{i}) = 1 OR EXISTS (SELECT 1 FROM "
                f"item_lexical AS l WHERE l.item_id = s.item_id AND l.tsv @@ ph.q{i})))"
            )
        test = (" AND " if operator == "AND" else " OR ").join(tests)
        join = ""
        filter_params: list[Any] = []
        if where is not None:
            compiled = compile_filter(where)
            join = (
                "JOIN item ON item.item_id = s.item_id "
                "LEFT JOIN resource ON resource.resource_id = item.resource_id "
            )
            test = f"({test}) AND ({compiled.sql})"
            filter_params = list(compiled.params)
        sql = (
            "WITH st AS (SELECT sum(rows)::float8 AS n, "
            "greatest(sum(tokens)::float8 / greatest(sum(rows), 1), 1e-9) AS avgdl "
            "FROM lexical_stats), "
            "q AS (SELECT t.term, greatest(ln((st.n - lt.rows + 0.5) "
            "/ (lt.rows + 0.5)), 1e-6) AS idf "
            "FROM unnest(%s::text[]) AS t(term) CROSS JOIN st CROSS JOIN LATERAL "
            "(SELECT coalesce(sum(rows), 0)::float8 AS rows FROM lexical_term "
            "WHERE term = t.term) AS lt), "
            f"ph AS MATERIALIZED (SELECT {phrases}), "
            f"s AS MATERIALIZED ({scored}) "
            f"SELECT s.item_id, s.score FROM s CROSS JOIN ph {join}"
            f"WHERE {test} ORDER BY s.score DESC, s.item_id LIMIT %s"
        )
        rows = self._conn.execute(
            sql,
            (
                lexemes,
                *(t for t, _ in matched),
                *scored_params,
                *(p for _, lxs in matched for p in (lxs,)),
                *filter_params,
                int(limit),
            ),
        ).fetchall()
        return [ScoredId(int(r[0]), float(r[1])) for r in rows]

    def term_frequencies(
        self, terms: Sequence[str], scope: Scope, *, kinds: Sequence[ItemKind] = ()
    ) -> dict[str, dict[int, int]]:
        clause, params = scope_kind_where(scope.key, list(kinds), table="p")
        postings: dict[str, dict[int, int]] = {}
        for term, lexemes in self._lexemes(terms):
            if not lexemes:
                postings[term] = {}
                continue
            # The scope's postings of every lexeme of the term: a row holds the term when it
            # holds them all (and, for a phrase, its tsvector matches the phrase). A phrase
            # occurs at most as often as its rarest lexeme: that is its frequency here.
            phrase = ""
            phrase_params: list[Any] = []
            if len(lexemes) > 1:
                phrase = (
                    "AND EXISTS (SELECT 1 FROM item_lexical AS l WHERE l.item_id = p.item_id "
                    f"AND l.tsv @@ phraseto_tsquery('{TS_CONFIG}', %s)) "
                )
                phrase_params = [term]
            rows = self._conn.execute(
                "SELECT p.item_id, min(p.tf) FROM lexical_posting AS p "
                f"WHERE p.term = ANY(%s::text[]) AND {clause} {phrase}"
                "GROUP BY p.item_id HAVING count(*) = %s",
                (sorted(set(lexemes)), *params, *phrase_params, len(set(lexemes))),
            ).fetchall()
            postings[term] = {int(r[0]): int(r[1]) for r in rows}
        return postings

    def lengths(self, scope: Scope, *, kinds: Sequence[ItemKind] = ()) -> dict[int, int]:
        clause, params = scope_kind_where(scope.key, list(kinds))
        return {
            int(r[0]): int(r[1])
            for r in self._conn.execute(
                "SELECT item.item_id, l.length FROM item "
                f"JOIN item_lexical AS l ON l.item_id = item.item_id WHERE {clause}",
                params,
            )
        }

    def term_rows(self, terms: Sequence[str]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for term, lexemes, rows in self._analyse(terms)[0]:
            if not lexemes:
                counts[term] = 0
            elif len(lexemes) == 1:
                counts[term] = int(rows[0])
            else:
                # A phrase: the rows holding its rarest lexeme whose tsvector holds the phrase.
                rarest = min(zip(rows, lexemes, strict=True))[1]
                row = self._conn.execute(
                    "SELECT count(*) FROM lexical_posting AS p "
                    "JOIN item_lexical AS l ON l.item_id = p.item_id "
                    f"WHERE p.term = %s AND l.tsv @@ (SELECT phraseto_tsquery('{TS_CONFIG}', %s))",
                    (rarest, term),
                ).fetchone()
                counts[term] = int(row[0]) if row else 0
        return counts
