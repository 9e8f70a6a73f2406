-- 0001_foundation: the unified store of DESIGN §2.
-- Every table carries `scope`, and every composite index starts with it, so two projects in
-- one file never see each other's rows and every read is a range scan within one scope.
-- Deletes never cascade into items: an item's FTS and vector rows must go with it, which only
-- the repository code can guarantee, so a stray parent delete fails loudly instead.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE resource (
    resource_id  INTEGER PRIMARY KEY,
    uid          TEXT NOT NULL UNIQUE,          -- stable: derived from uri + content hash
    scope        TEXT NOT NULL DEFAULT '',
    kind         TEXT NOT NULL,                 -- document | rule_document | text | ...
    uri          TEXT NOT NULL,                 -- path or virtual path
    content_hash TEXT NOT NULL,
    mtime        TEXT,
    size         INTEGER,
    tags         TEXT NOT NULL DEFAULT '[]',    -- JSON array
    source       TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    deleted      INTEGER NOT NULL DEFAULT 0,
    metadata     TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX resource_scope_kind_uri ON resource(scope, kind, uri);
CREATE INDEX resource_scope_hash ON resource(scope, content_hash);

CREATE TABLE category (
    category_id INTEGER PRIMARY KEY,
    scope       TEXT NOT NULL DEFAULT '',
    parent_id   INTEGER REFERENCES category(category_id),
    level       INTEGER NOT NULL CHECK (level BETWEEN 1 AND 100),
    name        TEXT NOT NULL,
    norm_name   TEXT NOT NULL,                  -- casefolded, whitespace-folded: no twins
    summary     TEXT,
    created_at  TEXT NOT NULL,
    metadata    TEXT NOT NULL DEFAULT '{}',
    CHECK ((level = 1 AND parent_id IS NULL) OR (level > 1 AND parent_id IS NOT NULL))
);
-- NULL parents would not collide in a plain UNIQUE; ifnull makes level-1 names unique too.
CREATE UNIQUE INDEX category_scope_parent_name ON category(scope, ifnull(parent_id, 0), norm_name);
CREATE INDEX category_parent ON category(parent_id);

CREATE TABLE item (
    item_id       INTEGER PRIMARY KEY,          -- rowid of item_fts and key of item_vec
    uid           TEXT NOT NULL UNIQUE,         -- stable: derived from resource + offset or content
    scope         TEXT NOT NULL DEFAULT '',
    kind          TEXT NOT NULL,                -- chunk | directive | memory | ...
    resource_id   INTEGER REFERENCES resource(resource_id),
    category_id   INTEGER REFERENCES category(category_id),
    text          TEXT NOT NULL,
    content_hash  TEXT NOT NULL,
    start_offset  INTEGER,
    end_offset    INTEGER,
    start_line    INTEGER,
    end_line      INTEGER,
    token_count   INTEGER NOT NULL,
    simhash       INTEGER,                      -- 64-bit, stored signed
    importance    REAL NOT NULL DEFAULT 0.5,
    pinned        INTEGER NOT NULL DEFAULT 0,
    repeat_count  INTEGER NOT NULL DEFAULT 0,
    tags          TEXT NOT NULL DEFAULT '[]',   -- JSON array
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    valid_from    TEXT,
    valid_to      TEXT,
    superseded_by INTEGER REFERENCES item(item_id),
    deleted       INTEGER NOT NULL DEFAULT 0,
    metadata      TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX item_scope_kind ON item(scope, kind, deleted);
CREATE INDEX item_resource ON item(resource_id, start_offset);
CREATE INDEX item_category ON item(category_id, created_at, item_id);
CREATE INDEX item_scope_hash ON item(scope, content_hash);
CREATE INDEX item_scope_simhash ON item(scope, simhash);

-- Its own copy of the text (not external content): item, FTS row and vector row are written and
-- deleted together by one function, so there are no triggers to keep in step.
CREATE VIRTUAL TABLE item_fts USING fts5(
    text, tags,
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TABLE entity (
    entity_id  INTEGER PRIMARY KEY,
    scope      TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL,                   -- rule | topic | layer | technology | section | ...
    name       TEXT NOT NULL,
    norm_name  TEXT NOT NULL,
    resource_id INTEGER REFERENCES resource(resource_id),
    created_at TEXT NOT NULL,
    metadata   TEXT NOT NULL DEFAULT '{}'
);
CREATE UNIQUE INDEX entity_scope_kind_name ON entity(scope, kind, norm_name);

CREATE TABLE relation (
    relation_id INTEGER PRIMARY KEY,
    scope       TEXT NOT NULL DEFAULT '',
    src_kind    TEXT NOT NULL CHECK (src_kind IN ('entity', 'item')),
    src_id      INTEGER NOT NULL,
    rel_type    TEXT NOT NULL,                  -- authoritative_for | layer | topic | related | ...
    dst_kind    TEXT NOT NULL CHECK (dst_kind IN ('entity', 'item')),
    dst_id      INTEGER NOT NULL,
    created_at  TEXT NOT NULL,
    metadata    TEXT NOT NULL DEFAULT '{}'
);
CREATE UNIQUE INDEX relation_unique ON relation(scope, src_kind, src_id, rel_type, dst_kind, dst_id);
CREATE INDEX relation_dst ON relation(scope, dst_kind, dst_id, rel_type);

CREATE TABLE observation (
    observation_id INTEGER PRIMARY KEY,
    scope      TEXT NOT NULL DEFAULT '',
    entity_id  INTEGER NOT NULL REFERENCES entity(entity_id),
    text       TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX observation_entity ON observation(entity_id);

CREATE TABLE event (
    event_id   INTEGER PRIMARY KEY,
    scope      TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL,                   -- user action, merge, trim, tool call, ...
    subject    TEXT,
    payload    TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
);
CREATE INDEX event_scope_time ON event(scope, created_at);

CREATE TABLE run (
    run_id      INTEGER PRIMARY KEY,
    scope       TEXT NOT NULL DEFAULT '',
    kind        TEXT NOT NULL,                  -- search | rules_query | hierarchy_query | ...
    started_at  TEXT NOT NULL,
    took_ms     REAL,
    payload     TEXT NOT NULL DEFAULT '{}'      -- candidates, budget, dropped paths, usage
);
CREATE INDEX run_scope_kind_time ON run(scope, kind, started_at);

CREATE TABLE tombstone (
    tombstone_id INTEGER PRIMARY KEY,
    scope        TEXT NOT NULL DEFAULT '',
    kind         TEXT NOT NULL,
    uid          TEXT NOT NULL,
    deleted_at   TEXT NOT NULL,
    expires_at   TEXT,
    payload      TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX tombstone_scope_uid ON tombstone(scope, uid);
