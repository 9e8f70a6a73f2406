"""Retrieval shared by every feature: query rewriting, fusion, packing and the one engine.

Pure modules (``fts``, ``rewrite``, ``fusion``, ``packer``) take values and return values; the
``engine`` module runs both search arms on the storage ports and fuses them. Import the engine
explicitly (``from memory_core.retrieval.engine import SearchEngine``) so that importing the pure
parts stays cheap.
"""
