"""MySQL / MariaDB backend of the category hierarchy (PyMySQL in a worker thread).

Import :class:`memory_core.storage.mysql.hierarchy.MysqlHierarchyStore` directly; this package
imports nothing on its own so that ``pymysql`` is only loaded when MySQL is used.
"""
