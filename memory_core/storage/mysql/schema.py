"""The memoir store's tables on MySQL / MariaDB: the tables of the ports the MySQL backend
implements (items, lexical, vectors, resources, categories, runs and events, meta), column for
column the SQLite / PostgreSQL schema where they share a table.

Choices that keep the backends identical:

- ``utf8mb4`` everywhere; text that is compared or ordered uses ``*_nopad_bin`` collations on
  MariaDB and ``utf8mb4_0900_bin`` on MySQL 8 (code-point order without PAD SPACE, so ``'a '``
  and ``'a'`` differ as they do in SQLite and in PostgreSQL's "C" collation).
- Level-1 categories have a NULL parent, which a plain UNIQUE would never see collide; the
  stored generated column ``parent_key = COALESCE(parent_id, 0)`` goes in the unique index, and
  the normalised name through ``name_key`` = sha256(norm_name) (fixed width: a long name never
  meets InnoDB's index length limit).
- Timestamps and JSON are text, as on the other backends, so they order and round-trip exactly.
- The lexical index is a term table (``item_term``: the term frequencies of each item) with
  BM25 statistics (``lexical_term``, ``lexical_stats``), ranked in SQL like FTS5's ``bm25()``;
  InnoDB FULLTEXT has no BM25, a minimum word length and a stop-word list.
- Vectors are float32 blobs in ``item_vec`` (MariaDB before 11.7 and MySQL 8 have no vector
  type); the store searches them exactly.
"""

from __future__ import annotations

__all__ = ["SCHEMA_LOCK_NAME", "SCHEMA_VERSION", "schema_statements"]

SCHEMA_VERSION = 1

# GET_LOCK name: two processes opening a fresh database at once create the tables one by one.
SCHEMA_LOCK_NAME = "memoir_store_schema"


def schema_statements(*, mariadb: bool = True) -> tuple[str, ...]:
    """The DDL for MariaDB (``*_nopad_bin``) or MySQL 8 (``utf8mb4_0900_bin``, also NO PAD)."""
    collation = "utf8mb4_nopad_bin" if mariadb else "utf8mb4_0900_bin"
    t = f"CHARACTER SET utf8mb4 COLLATE {collation}"
    a = f"CHARACTER SET ascii COLLATE {'ascii_nopad_bin' if mariadb else 'ascii_bin'}"
    table = f"ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE={collation}"
    return (
        f"""CREATE TABLE IF NOT EXISTS schema_migration (
            version INT NOT NULL PRIMARY KEY, name VARCHAR(100) NOT NULL,
            applied_at VARCHAR(40) {a} NOT NULL) {table}""",
        f"""CREATE TABLE IF NOT EXISTS meta (
            `key` VARCHAR(255) {t} NOT NULL PRIMARY KEY, value LONGTEXT NOT NULL) {table}""",
        f"""CREATE TABLE IF NOT EXISTS resource (
            resource_id  BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            uid          VARCHAR(255) {t} NOT NULL,
            scope        VARCHAR(512) {t} NOT NULL DEFAULT '',
            kind         VARCHAR(64) {t} NOT NULL,
            uri          VARCHAR(1024) {t} NOT NULL,
            content_hash VARCHAR(255) {t} NOT NULL,
            mtime        VARCHAR(40) {a} NULL,
            size         BIGINT NULL,
            tags         LONGTEXT NOT NULL,
            source       LONGTEXT NULL,
            created_at   VARCHAR(40) {a} NOT NULL,
            updated_at   VARCHAR(40) {a} NOT NULL,
            deleted      SMALLINT NOT NULL DEFAULT 0,
            metadata     LONGTEXT NOT NULL,
            UNIQUE KEY resource_uid (uid),
            KEY resource_scope_kind (scope, kind),
            KEY resource_scope_hash (scope, content_hash)) {table}""",
        f"""CREATE TABLE IF NOT EXISTS category (
            category_id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            scope       VARCHAR(512) {t} NOT NULL DEFAULT '',
            parent_id   BIGINT NULL,
            parent_key  BIGINT AS (COALESCE(parent_id, 0)) STORED,
            level       INT NOT NULL,
            name        LONGTEXT {t} NOT NULL,
            norm_name   LONGTEXT {t} NOT NULL,
            name_key    BINARY(32) AS (UNHEX(SHA2(norm_name, 256))) STORED,
            summary     LONGTEXT NULL,
            created_at  VARCHAR(40) {a} NOT NULL,
            metadata    LONGTEXT NOT NULL,
            UNIQUE KEY category_scope_parent_name (scope, parent_key, name_key),
            KEY category_parent (parent_id),
            CONSTRAINT category_parent_fk FOREIGN KEY (parent_id) REFERENCES category (category_id),
            CONSTRAINT category_level CHECK (level BETWEEN 1 AND 100),
            CONSTRAINT category_root CHECK (
                (level = 1 AND parent_id IS NULL) OR (level > 1 AND parent_id IS NOT NULL))
        ) {table}""",
        f"""CREATE TABLE IF NOT EXISTS item (
            item_id       BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            uid           VARCHAR(255) {t} NOT NULL,
            scope         VARCHAR(512) {t} NOT NULL DEFAULT '',
            kind          VARCHAR(64) {t} NOT NULL,
            resource_id   BIGINT NULL,
            category_id   BIGINT NULL,
            text          LONGTEXT {t} NOT NULL,
            content_hash  VARCHAR(255) {t} NOT NULL,
            start_offset  BIGINT NULL,
            end_offset    BIGINT NULL,
            start_line    BIGINT NULL,
            end_line      BIGINT NULL,
            token_count   BIGINT NOT NULL,
            simhash       BIGINT NULL,
            importance    DOUBLE NOT NULL DEFAULT 0.5,
            pinned        SMALLINT NOT NULL DEFAULT 0,
            repeat_count  BIGINT NOT NULL DEFAULT 0,
            tags          LONGTEXT NOT NULL,
            created_at    VARCHAR(40) {a} NOT NULL,
            updated_at    VARCHAR(40) {a} NOT NULL,
            valid_from    VARCHAR(40) {a} NULL,
            valid_to      VARCHAR(40) {a} NULL,
            superseded_by BIGINT NULL,
            deleted       SMALLINT NOT NULL DEFAULT 0,
            metadata      LONGTEXT NOT NULL,
            UNIQUE KEY item_uid (uid),
            KEY item_scope_kind (scope, kind, deleted),
            KEY item_resource (resource_id, start_offset),
            KEY item_category_created_uid (category_id, created_at, uid),
            KEY item_scope_hash (scope, content_hash),
            KEY item_superseded_by (superseded_by),
            CONSTRAINT item_resource_fk FOREIGN KEY (resource_id) REFERENCES resource (resource_id),
            CONSTRAINT item_category_fk FOREIGN KEY (category_id) REFERENCES category (category_id),
            CONSTRAINT item_superseded_fk FOREIGN KEY (superseded_by) REFERENCES item (item_id)
        ) {table}""",
        f"""CREATE TABLE IF NOT EXISTS item_simhash_band (
            scope   VARCHAR(512) {t} NOT NULL,
            band    SMALLINT NOT NULL,
            value   INT NOT NULL,
            item_id BIGINT NOT NULL,
            PRIMARY KEY (scope, band, value, item_id),
            KEY item_simhash_band_item (item_id)) {table}""",
        f"""CREATE TABLE IF NOT EXISTS item_lexical (
            item_id BIGINT NOT NULL PRIMARY KEY, length INT NOT NULL) {table}""",
        f"""CREATE TABLE IF NOT EXISTS item_term (
            term    VARCHAR(191) {t} NOT NULL,
            item_id BIGINT NOT NULL,
            tf      INT NOT NULL,
            PRIMARY KEY (term, item_id),
            KEY item_term_item (item_id)) {table}""",
        f"""CREATE TABLE IF NOT EXISTS lexical_term (
            term      VARCHAR(191) {t} NOT NULL PRIMARY KEY,
            row_count BIGINT NOT NULL) {table}""",
        f"""CREATE TABLE IF NOT EXISTS lexical_stats (
            id INT NOT NULL PRIMARY KEY, row_count BIGINT NOT NULL,
            tokens BIGINT NOT NULL) {table}""",
        "INSERT IGNORE INTO lexical_stats (id, row_count, tokens) VALUES (1, 0, 0)",
        f"""CREATE TABLE IF NOT EXISTS item_vec (
            item_id   BIGINT NOT NULL PRIMARY KEY,
            scope     VARCHAR(512) {t} NOT NULL,
            kind      VARCHAR(64) {t} NOT NULL,
            embedding LONGBLOB NOT NULL,
            KEY item_vec_scope_kind (scope, kind)) {table}""",
        f"""CREATE TABLE IF NOT EXISTS event (
            event_id   BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            scope      VARCHAR(512) {t} NOT NULL DEFAULT '',
            kind       VARCHAR(64) {t} NOT NULL,
            subject    LONGTEXT NULL,
            payload    LONGTEXT NOT NULL,
            created_at VARCHAR(40) {a} NOT NULL,
            KEY event_scope_time (scope, created_at),
            KEY event_scope_kind_time (scope, kind, created_at)) {table}""",
        f"""CREATE TABLE IF NOT EXISTS run (
            run_id     BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            scope      VARCHAR(512) {t} NOT NULL DEFAULT '',
            kind       VARCHAR(64) {t} NOT NULL,
            started_at VARCHAR(40) {a} NOT NULL,
            took_ms    DOUBLE NULL,
            payload    LONGTEXT NOT NULL,
            KEY run_scope_kind_id (scope, kind, run_id),
            KEY run_scope_id (scope, run_id)) {table}""",
    )
