"""Retrieval shared by every feature: FTS quoting, query rewriting, fusion, packing, hybrid search.

Pure modules (``fts``, ``rewrite``, ``fusion``, ``packer``) import nothing from storage; the
``hybrid`` orchestrator is imported explicitly (``from memory_core.retrieval.hybrid import
hybrid_search``) so that importing the pure parts stays cheap.
"""
