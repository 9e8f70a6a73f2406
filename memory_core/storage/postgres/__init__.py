"""PostgreSQL backend of the category hierarchy (psycopg 3, async).

Import :class:`memory_core.storage.postgres.hierarchy.PostgresHierarchyStore` directly; this
package imports nothing on its own so that ``psycopg`` is only loaded when PostgreSQL is used.
"""
