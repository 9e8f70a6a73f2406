-- 0003_lexical_scope_kind: item_lexical carries its item's scope, kind and deleted flag, so the
-- lexical search filters the rows its GIN index matched without reading item (at 100k chunks
-- the join to item was a sequential scan of the whole table, most of an OR query's time).
-- The three never change once an item is written (ItemUpdate has no such field; items are
-- removed, with their lexical row, not flagged), so lexical_add copies them with the row and
-- nothing else has to keep them in step. Existing rows are filled from item.

ALTER TABLE item_lexical
    ADD COLUMN scope   TEXT COLLATE "C",
    ADD COLUMN kind    TEXT COLLATE "C",
    ADD COLUMN deleted SMALLINT;
UPDATE item_lexical AS l
    SET scope = item.scope, kind = item.kind, deleted = item.deleted
    FROM item WHERE item.item_id = l.item_id;
ALTER TABLE item_lexical
    ALTER COLUMN scope SET NOT NULL,
    ALTER COLUMN kind SET NOT NULL,
    ALTER COLUMN deleted SET NOT NULL;
