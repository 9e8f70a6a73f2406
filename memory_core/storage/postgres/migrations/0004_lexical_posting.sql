-- 0004_lexical_posting: a posting per (term, item): the term's frequency in the item's lexical
-- document, the document's length, and the item's scope, kind and deleted flag. BM25 then reads
-- the postings of the query's terms only (term at a time), instead of matching tsvectors with
-- the GIN index and unnesting every matched row's tsvector to find its term frequencies (at
-- 100k chunks ~90 % of an OR statement's time). tf and length are the values the old statement
-- computed (positions of the lexeme in the tsvector; item_lexical.length), so scores are the
-- same to the last bit. item_lexical keeps the tsvector (no longer GIN-indexed, below): phrases
-- (a term of several words) are checked against it, and a delete reads its lexemes to find the
-- postings.
-- Written and removed with the lexical row by lexical_add / lexical_remove, in the item's
-- transaction. Existing rows are filled from item_lexical.

CREATE TABLE lexical_posting (
    term    TEXT COLLATE "C" NOT NULL,
    item_id BIGINT NOT NULL,
    tf      INTEGER NOT NULL,
    length  INTEGER NOT NULL,
    scope   TEXT COLLATE "C" NOT NULL,
    kind    TEXT COLLATE "C" NOT NULL,
    deleted SMALLINT NOT NULL,
    PRIMARY KEY (term, item_id)
);
INSERT INTO lexical_posting (term, item_id, tf, length, scope, kind, deleted)
    SELECT u.lexeme, l.item_id, coalesce(array_length(u.positions, 1), 1), l.length,
           l.scope, l.kind, l.deleted
    FROM item_lexical AS l, unnest(l.tsv) AS u
    ORDER BY u.lexeme, l.item_id;

-- Nothing matches tsvectors through an index any more: the search finds rows by their postings
-- and checks a phrase on the tsvector of a row it already found (by primary key). The GIN index
-- only cost writes.
DROP INDEX item_lexical_tsv;
