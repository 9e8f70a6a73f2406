"""The MySQL / MariaDB store (PyMySQL): the category hierarchy's ports, on the shared server base.

Import :class:`memory_core.storage.mysql.store.MysqlStore` directly (or open a ``mysql://``
URL with :func:`memory_core.storage.open_store`); this package imports nothing on its own so
that ``pymysql`` is only loaded when MySQL is used.
"""
