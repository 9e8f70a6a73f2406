"""The ``memoir`` command line. Kept free of the MCP SDK: ``memoir serve`` imports it lazily."""
