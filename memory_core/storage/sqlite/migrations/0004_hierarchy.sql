-- 0004_hierarchy: the memoirAI chunk look-up in the hierarchy's own order.
-- Chunks of a leaf category are read in (created_at, uid) order with keyset pagination, so the
-- budget step can stop reading exactly at the budget; 0001's item_category index is keyed by
-- item_id, which does not match that order once two chunks share a timestamp.
CREATE INDEX item_category_created_uid ON item(category_id, created_at, uid) WHERE category_id IS NOT NULL;
