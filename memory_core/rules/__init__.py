"""The rules knowledge graph: upsert rule documents, detect a task's context, rank directives.

Entry point: :class:`memory_core.rules.service.RulesService` (``Memoir.rules``). Modules, one
reason to change each: ``graph`` (document → write plan), ``ingest`` (read, embed, write),
``topics`` and ``dictionaries`` (vocabulary), ``detection``, ``candidates`` (graph expansion,
lexical and semantic arms), ``scoring`` (the seed-003 formula), ``context_block`` (budget and
rendering), ``index`` (the in-memory view the ranker reads), ``models`` (result types).
Nothing is imported here, so importing the package stays cheap.
"""
