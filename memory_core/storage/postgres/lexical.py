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
from memory_core.storage.server.items import lexical_lengths

__all__ = ["PgLexical"]

_K1 = 1.2
_B = 0.75
# An OR search first scores the rows of its rarest terms, adding terms while their rows stay
# under this many times the limit (``PgLexical._or_pruned``).
_ESSENTIAL_ROWS = 20


def _idf(counts: dict[str, float], total: float) -> dict[str, float]:
    """BM25 IDF per lexeme from the rows holding it, as ``_scored``'s SQL computes it (the
    pruning bound's margin covers a last-bit difference between the two ``ln``s)."""
    return {
        lexeme: max(math.log((total - rows + 0.5) / (rows + 0.5)), 1e-6)
        for lexeme, rows in counts.items()
    }


def _merged(first: list[ScoredId], second: list[ScoredId], limit: int) -> list[ScoredId]:
    """The top ``limit`` of two result sets in the statement's order (score, then id); a row
    in both has the same score in both (every statement sums a row's terms in one order)."""
    rows = {hit.item_id: hit for hit in first}
    rows.update((hit.item_id, hit) for hit in second)
    return sorted(rows.values(), key=lambda hit: (-hit.score, hit.item_id))[:limit]


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
        if query.operator == "AND":
            if min(counts.values()) == 0:
                return []  # a lexeme in no row: no row holds every term
            return self._scored(
                terms, sorted(counts), "AND", scope, kinds, where, limit, counts=counts
            )
        # A term with a lexeme in no row matches no row, and a lexeme in no row scores in no
        # row: both are left out before anything is planned (such a lexeme's IDF is the
        # highest of all and would otherwise set the pruning bound). A present lexeme of an
        # absent phrase still scores in the rows that match the other terms.
        terms = [(t, lxs) for t, lxs in terms if all(counts[lx] > 0 for lx in lxs)]
        counts = {lx: n for lx, n in counts.items() if n > 0}
        if not terms:
            return []
        lexemes = sorted(counts)
        if len(terms) > 1:
            pruned = self._or_pruned(terms, lexemes, counts, total, scope, kinds, where, limit)
            if pruned is not None:
                return pruned
        return self._scored(terms, lexemes, "OR", scope, kinds, where, limit, counts=counts)

    def _or_pruned(
        self,
        terms: list[tuple[str, list[str]]],
        lexemes: list[str],
        counts: dict[str, float],
        total: float,
        scope: Scope | None,
        kinds: Sequence[ItemKind],
        where: Filter | None,
        limit: int,
    ) -> list[ScoredId] | None:
        """The OR query's exact top ``limit``, scoring only rows that can enter it; None when
        no ``limit`` rows are found to set a threshold (the full statement then).

        A word in 10 % of the rows has a small IDF, yet matching it makes the full statement
        score every row holding it (an OR of three common words at 1M chunks: 237k rows,
        ~400 ms). Instead, threshold style, two statements at most:

        1. a first set of rows, scored on every lexeme and matched as the full statement
           does, whose ``limit``-th score t is reached by every row of the answer (a row
           below t ranks below ``limit`` rows already found). The rows of the *rarest* terms
           (added rarest first while their rows stay under ``_ESSENTIAL_ROWS`` times
           ``limit``) when there are such terms: a row matching none of them then holds none
           of their one-lexeme terms and scores at most the other lexemes' summed bounds
           ``(k1 + 1) * idf``; if that is below t, the first rows are the answer (MaxScore).
           Otherwise (every term common) the ``limit`` best postings of each lexeme.
        2. otherwise, one pass over the postings of the lexemes that can add to a row outside
           the first set, summed per row without order or term list (the costly part of the
           full statement for 237k rows), keeping the rows that reach t (less a margin for
           the summation order); only those are scored in full and matched. The two sets,
           each row scored on every lexeme by the same expression, are merged.

        Exact: every row of the full query's top ``limit`` is in one of the two sets, with
        the full statement's score, so the merged order is the full statement's.
        """
        rows = {t: min(counts[lx] for lx in lxs) for t, lxs in terms}  # each term's driver
        ordered = sorted(terms, key=lambda term: (rows[term[0]], term[0]))
        essential: list[tuple[str, list[str]]] = []
        reach = 0.0
        for term in ordered[:-1]:
            if reach + rows[term[0]] > _ESSENTIAL_ROWS * limit:
                break
            essential.append(term)
            reach += rows[term[0]]
        idf = _idf(counts, total)
        hits: list[ScoredId] = []
        if essential:
            hits = self._scored(
                terms, lexemes, "OR", scope, kinds, where, limit, match=essential, counts=counts
            )
        if len(hits) >= limit:
            # A row matching none of the essential terms holds none of their one-lexeme
            # terms, but may hold some lexemes of an essential phrase.
            sure = {lxs[0] for _, lxs in essential if len(lxs) == 1}
        else:
            sure = set()
            sample = self._scored(terms, lexemes, "OR", scope, kinds, where, limit, best=limit)
            hits = _merged(hits, sample, limit)
            if len(hits) < limit:
                return None
        threshold = hits[limit - 1].score
        bounds = {lx: (_K1 + 1) * idf[lx] for lx in lexemes if lx not in sure}
        summed = sum(bounds.values())
        # The margins cover float rounding between Python's bound and the statement's sums.
        if threshold > summed * (1 + 1e-9) + 1e-12:
            return hits
        # The commonest of those lexemes, while their bounds sum to at most half of t, are not
        # read: a row reaches t only if the others contribute t less that sum (MaxScore
        # again, inside the threshold statement).
        skipped = 0.0
        read = set(bounds)
        for bound, lexeme in sorted((b, lx) for lx, b in bounds.items()):
            if skipped + bound > threshold / 2:
                break
            skipped += bound
            read.discard(lexeme)
        rest = sorted(read)
        floor = threshold * (1 - 1e-9) - skipped * (1 + 1e-9)
        others = self._scored(
            terms,
            lexemes,
            "OR",
            scope,
            kinds,
            where,
            limit,
            least=(rest, [idf[lx] for lx in rest], floor),
        )
        return _merged(hits, others, limit)

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
        least: tuple[list[str], list[float], float] | None = None,
        best: int = 0,
    ) -> list[ScoredId]:
        """BM25 over every lexeme of ``lexemes`` for the rows matching ``match`` (default:
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

        ``least`` (lexemes, their IDFs, floor): the candidates are instead the rows whose
        postings of those lexemes contribute at least ``floor`` together (with the IDFs given:
        the floor's margin must cover their last bits). ``best``: the
        candidates are instead the rows of each lexeme's ``best`` highest contributions.
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
        # A posting's contribution: the expression the score sums, so the same value.
        contribution = (
            "q.idf * (p.tf::float8 * %s) / (p.tf::float8 + %s * (1 - %s + %s * p.length "
            "/ st.avgdl))"
        )
        # The few candidates of ``least`` and ``best`` read their postings by primary key
        # (joined instead, the planner hashes every posting of the query's lexemes again:
        # 1.7M at 1M chunks for 2,381 rows). The LIMIT (the key is unique) keeps the planner
        # from flattening the lateral subquery into that join.
        rescore = (
            "CROSS JOIN q CROSS JOIN st CROSS JOIN LATERAL (SELECT x.term, x.tf, x.length "
            "FROM lexical_posting AS x WHERE x.term = q.term AND x.item_id = c.item_id "
            "LIMIT 1) AS p GROUP BY c.item_id"
        )
        if least is not None:
            # One pass over the postings of those lexemes, a plain (unordered) sum per row,
            # no term list: only the rows whose sum reaches the floor are scored in full
            # (ordered sum, present terms, match). The IDF is a CASE of parameters, not a
            # join, so the planner estimates the postings from the lexemes' statistics
            # (joined, it guessed ~60 rows a lexeme and sorted 190k postings on disk).
            rest, rest_idf, floor = least
            weight = " ".join("WHEN %s THEN %s::float8" for _ in rest)
            scored = (
                f"SELECT c.item_id, {score} FROM (SELECT p.item_id FROM lexical_posting AS p "
                f"CROSS JOIN st WHERE p.term = ANY(%s::text[]) AND {clause} "
                f"GROUP BY p.item_id HAVING sum((CASE p.term {weight} END) "
                f"{contribution.removeprefix('q.idf ')}) >= %s) AS c {rescore}"
            )
            pairs = [x for pair in zip(rest, rest_idf, strict=True) for x in pair]
            scored_params: list[Any] = [*weights, rest, *params, *pairs, *weights, floor]
        elif best > 0:
            scored = (
                f"SELECT c.item_id, {score} FROM (SELECT DISTINCT x.item_id FROM q CROSS JOIN st "
                "CROSS JOIN LATERAL (SELECT p.item_id FROM lexical_posting AS p "
                f"WHERE p.term = q.term AND {clause} "
                f"ORDER BY {contribution} DESC, p.item_id LIMIT %s) AS x) AS c {rescore}"
            )
            scored_params = [*weights, *params, *weights, best]
        elif set(drivers) == set(lexemes):
            # Term at a time: the postings of the query's lexemes are the whole score.
            scored = (
                f"SELECT p.item_id, {score} FROM lexical_posting AS p "
                "JOIN q ON q.term = p.term CROSS JOIN st "
                f"WHERE p.term = ANY(%s::text[]) AND {clause} GROUP BY p.item_id"
            )
            scored_params = [*weights, lexemes, *params]
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
        return lexical_lengths(self._conn, *scope_kind_where(scope.key, list(kinds)))

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
