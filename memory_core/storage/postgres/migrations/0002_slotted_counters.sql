-- 0002_slotted_counters: the counters every write updates are split into 16 slots, so that
-- concurrent writers do not queue on the same rows until they commit. A writer updates the
-- slot of its connection (pg_backend_pid() % 16); readers sum the slots, so every count stays
-- exact and transactional (a slot may go negative when another connection removes what this
-- one added; the sum is what counts).
-- * lexical_term: rows holding a term, per (term, slot).
-- * lexical_stats: row count and summed length, per slot.
-- * vector_generation: the vector stamp per (scope, slot), replacing the meta rows
--   vectors_generation and vectors_generation:<scope>; the store-wide stamp is the sum of
--   every row (each write bumps the rows of the scopes it touched).
-- Existing counts move to slot 0.

ALTER TABLE lexical_term ADD COLUMN slot SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE lexical_term DROP CONSTRAINT lexical_term_pkey;
ALTER TABLE lexical_term ADD PRIMARY KEY (term, slot);
ALTER TABLE lexical_term ALTER COLUMN slot DROP DEFAULT;
ALTER TABLE lexical_term ADD CONSTRAINT lexical_term_slot CHECK (slot >= 0 AND slot < 16);

ALTER TABLE lexical_stats DROP CONSTRAINT lexical_stats_id_check;
ALTER TABLE lexical_stats RENAME COLUMN id TO slot;
UPDATE lexical_stats SET slot = 0;
ALTER TABLE lexical_stats ADD CONSTRAINT lexical_stats_slot CHECK (slot >= 0 AND slot < 16);
INSERT INTO lexical_stats (slot, rows, tokens)
    SELECT s, 0, 0 FROM generate_series(1, 15) AS s;

CREATE TABLE vector_generation (
    scope      TEXT COLLATE "C" NOT NULL,
    slot       SMALLINT NOT NULL CHECK (slot >= 0 AND slot < 16),
    generation BIGINT NOT NULL,
    PRIMARY KEY (scope, slot)
);
INSERT INTO vector_generation (scope, slot, generation)
    SELECT substr(key, length('vectors_generation:') + 1), 0, value::bigint
    FROM meta WHERE starts_with(key, 'vectors_generation:');
DELETE FROM meta WHERE key = 'vectors_generation' OR starts_with(key, 'vectors_generation:');
