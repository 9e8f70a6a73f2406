"""The MySQL / MariaDB tables of the category hierarchy, created idempotently on first use.

Choices that keep the three backends identical:

- ``utf8mb4`` everywhere; text that is compared or ordered uses ``*_nopad_bin`` collations
  on MariaDB and ``utf8mb4_0900_bin`` on MySQL 8
  (code-point order without PAD SPACE, so ``'a '`` and ``'a'`` differ as they do in SQLite).
- Level-1 categories have a NULL parent, which a plain UNIQUE would never see collide; the
  stored generated column ``parent_key = COALESCE(parent_id, 0)`` goes in the unique index.
- The normalised name is indexed through ``name_key`` = sha256(norm_name): an exact key of
  fixed width, so a long name never meets InnoDB's index length limit.
- Timestamps are ISO-8601 strings (``VARCHAR(40)``) so they order exactly as in SQLite.
"""

from __future__ import annotations

__all__ = ["SCHEMA_LOCK_NAME", "SCHEMA_STATEMENTS", "SCHEMA_VERSION", "schema_statements"]

SCHEMA_VERSION = 1

# GET_LOCK name: two processes opening a fresh database at once create the tables one by one.
SCHEMA_LOCK_NAME = "memoir_hierarchy_schema"


def schema_statements(*, mariadb: bool = True) -> tuple[str, ...]:
    """The DDL for MariaDB (``*_nopad_bin``) or MySQL 8 (``utf8mb4_0900_bin``, also NO PAD)."""
    text_collation = "utf8mb4_nopad_bin" if mariadb else "utf8mb4_0900_bin"
    # ASCII columns hold ISO timestamps only, which never end in spaces: PAD SPACE is harmless.
    ascii_collation = "ascii_nopad_bin" if mariadb else "ascii_bin"
    return _statements(
        text=f"CHARACTER SET utf8mb4 COLLATE {text_collation}",
        ascii_cs=f"CHARACTER SET ascii COLLATE {ascii_collation}",
        table=f"ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE={text_collation}",
    )


def _statements(*, text: str, ascii_cs: str, table: str) -> tuple[str, ...]:
    return (
        f"""
        CREATE TABLE IF NOT EXISTS memoir_schema (
            version    INT NOT NULL PRIMARY KEY,
            applied_at VARCHAR(40) {ascii_cs} NOT NULL
        ) {table}
        """,
        f"""
        CREATE TABLE IF NOT EXISTS memoir_category (
            category_id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            scope       VARCHAR(512) {text} NOT NULL,
            parent_id   BIGINT NULL,
            parent_key  BIGINT AS (COALESCE(parent_id, 0)) STORED,
            level       INT NOT NULL,
            name        LONGTEXT {text} NOT NULL,
            norm_name   LONGTEXT {text} NOT NULL,
            name_key    BINARY(32) NOT NULL,
            summary     LONGTEXT NULL,
            created_at  VARCHAR(40) {ascii_cs} NOT NULL,
            metadata    LONGTEXT NOT NULL,
            UNIQUE KEY memoir_category_scope_parent_name (scope, parent_key, name_key),
            KEY memoir_category_parent (parent_id),
            KEY memoir_category_scope_level (scope, level),
            CONSTRAINT memoir_category_parent_fk FOREIGN KEY (parent_id)
                REFERENCES memoir_category (category_id),
            CONSTRAINT memoir_category_level CHECK (level BETWEEN 1 AND 100),
            CONSTRAINT memoir_category_root CHECK (
                (level = 1 AND parent_id IS NULL) OR (level > 1 AND parent_id IS NOT NULL))
        ) {table}
        """,
        f"""
        CREATE TABLE IF NOT EXISTS memoir_chunk (
            chunk_id     BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            uid          VARCHAR(255) {text} NOT NULL,
            scope        VARCHAR(512) {text} NOT NULL,
            category_id  BIGINT NOT NULL,
            text         LONGTEXT {text} NOT NULL,
            token_count  INT NOT NULL,
            content_hash VARCHAR(255) {text} NOT NULL,
            created_at   VARCHAR(40) {ascii_cs} NOT NULL,
            source       LONGTEXT NULL,
            metadata     LONGTEXT NOT NULL,
            embedding    LONGBLOB NULL,
            UNIQUE KEY memoir_chunk_uid (uid),
            KEY memoir_chunk_category (category_id, created_at, uid),
            KEY memoir_chunk_scope_hash (scope, content_hash),
            CONSTRAINT memoir_chunk_category_fk FOREIGN KEY (category_id)
                REFERENCES memoir_category (category_id)
        ) {table}
        """,
        f"""
        CREATE TABLE IF NOT EXISTS memoir_run (
            run_id     BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            scope      VARCHAR(512) {text} NOT NULL,
            kind       VARCHAR(64) {text} NOT NULL,
            started_at VARCHAR(40) {ascii_cs} NOT NULL,
            took_ms    DOUBLE NULL,
            payload    LONGTEXT NOT NULL,
            -- list_runs reads the newest runs of a scope (optionally of one kind) by run_id.
            KEY memoir_run_scope_kind_id (scope, kind, run_id),
            KEY memoir_run_scope_id (scope, run_id)
        ) {table}
        """,
    )


SCHEMA_STATEMENTS = schema_statements(mariadb=True)
