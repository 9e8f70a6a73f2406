"""The shared base of the two server backends (PostgreSQL, MySQL/MariaDB).

Both drivers (psycopg 3, PyMySQL) take ``%s`` parameters, so the repositories whose SQL is the
same on both live here once, written against a :class:`~memory_core.storage.server.dialect.Dialect`
that spells what differs (list parameters, insert-or-ignore, JSON paths, regular expressions).
``storage/postgres`` and ``storage/mysql`` specialise them (types, lexical index, vector
search) behind their own class names.
"""
