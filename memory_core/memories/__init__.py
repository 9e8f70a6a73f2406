"""The agent's own memories (seeds/001, the Theoria memory upgrade; DESIGN §1 ``memories/``).

What an agent learns in conversation (preferences, decisions, facts, commitments) stored as
items of kind ``memory`` on the storage ports, merged when repeated, ranked by relevance,
recency and importance, and under the user's control (pin, forget, incognito, settings).

The facade is :class:`memory_core.memories.service.MemoryService` (``Memoir.memories``);
the modules below it are small and mostly pure:

- ``text``: normalisation, the forget digest, 64-bit SimHash.
- ``spaces``: a (user, space) pair as a store :class:`~memory_core.scope.Scope`.
- ``records``: the stored shape (an item plus typed metadata) and the public views.
- ``enrich`` / ``importance``: metadata extraction and importance heuristics.
- ``writes`` / ``conflicts``: the write plan (insert, merge, supersede) as pure functions.
- ``ranking``: recency, tri-score, MMR; ``recall``: hybrid retrieval to a packed context.
- ``capacity``: soft cap trimming and retention; ``backfill``: the embedding worker.
- ``controls``: per-space settings and incognito; ``telemetry``: stats for dashboards.
- ``anchors``: code-anchored memories; ``transfer`` / ``importers``: JSONL and foreign formats.
- ``graph_compat``: the official memory server's nine graph operations on memoir's graph.
"""
