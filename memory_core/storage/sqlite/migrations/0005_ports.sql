-- 0005_ports: what the storage ports need beyond 0001-0004.
-- SimHash near-duplicate lookups (ItemRepository.near_simhash) without scanning a scope: the
-- 64-bit hash is cut into four 16-bit bands; two hashes within Hamming distance 3 share at
-- least one band exactly (pigeonhole), so candidates are found by four index probes.
CREATE TABLE item_simhash_band (
    scope   TEXT NOT NULL,
    band    INTEGER NOT NULL,                   -- 0..3
    value   INTEGER NOT NULL,                   -- (simhash >> 16*band) & 0xffff
    item_id INTEGER NOT NULL REFERENCES item(item_id),
    PRIMARY KEY (scope, band, value, item_id)
) WITHOUT ROWID;
CREATE INDEX item_simhash_band_item ON item_simhash_band(item_id);
INSERT INTO item_simhash_band (scope, band, value, item_id)
    SELECT scope, b.band, (simhash >> (16 * b.band)) & 65535, item_id
    FROM item, (SELECT 0 AS band UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3) AS b
    WHERE simhash IS NOT NULL;
-- The "recent" item order (newest change first), for the kinds listed by recency (agent
-- memories, memory-layer items). Partial: a document chunk or directive write does not pay
-- for it. Queries name these kinds as literals, so the planner can use it.
CREATE INDEX item_recent ON item(scope, kind, updated_at, item_id)
    WHERE kind IN ('memory', 'layer_item');
-- Events by kind (audit trail filters, telemetry counts).
CREATE INDEX event_scope_kind_time ON event(scope, kind, created_at);
-- Tombstones by kind and uid (a forgotten memory's digest is checked on every remember).
CREATE INDEX tombstone_scope_kind_uid ON tombstone(scope, kind, uid);
