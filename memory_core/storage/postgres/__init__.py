"""The PostgreSQL + pgvector store (psycopg 3): every port, on the shared server base.

Import :class:`memory_core.storage.postgres.store.PgStore` directly (or open a
``postgresql://`` URL with :func:`memory_core.storage.open_store`); this package imports
nothing on its own so that ``psycopg`` is only loaded when PostgreSQL is used.
"""
