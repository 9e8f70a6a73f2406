"""Is a candidate directive relevant to the task at all? (pure)

The seed-003 score ranks; it does not say when to stop. Its severity and layer terms give
every MUST of a wildcard rule a high score whatever the task, so a block filled to the budget
is mostly padding. Relevance is the task-specific evidence alone: semantic similarity, the
lexical arm's rank, a met When-to-Apply condition, rule authority and shared topics. A
candidate enters the block only if its relevance clears an absolute floor and stays within a
ratio of the best candidate's (an elbow): the budget is a ceiling, not a target.

The constants were tuned on the public dev set (``bench/rules_eval/run_dev.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["LEXICAL_WEIGHT", "STRUCTURE_WEIGHT", "RelevanceGate", "relevance", "short_reason"]

# How much the lexical arm's rank adds to the similarity (at rank 0; linear to 0 at the end).
LEXICAL_WEIGHT = 0.20
# How much declared metadata (When-to-Apply, authority) counts next to similarity.
STRUCTURE_WEIGHT = 1.0


@dataclass(frozen=True)
class RelevanceGate:
    """Floor and elbow for the relevance cut.

    Attributes:
        floor: the least relevance a directive needs (similarity units, 0..~1.5).
        ratio: the least share of the best candidate's relevance.
        keep_at_least: never cut below this many (a vague task still gets its best few).
    """

    floor: float = 0.10
    ratio: float = 0.0
    keep_at_least: int = 3

    def cut(self, relevances: Sequence[float]) -> int:
        """How many of the candidates (sorted by relevance, best first) to keep."""
        if not relevances:
            return 0
        bar = max(self.floor, relevances[0] * self.ratio)
        kept = sum(1 for r in relevances if r >= bar)
        return max(kept, min(self.keep_at_least, len(relevances)))


def relevance(
    *,
    semantic: float | None,
    lexical_rank: int | None,
    lexical_size: int,
    when_to_apply: float,
    authority: float,
    topic_overlap: float,
) -> float:
    """Task-specific evidence that a directive matters, on a similarity-like scale.

    Args:
        semantic: cosine similarity with the task (None when the embedder is unavailable).
        lexical_rank: 0-based position in the lexical arm's ranking, or None.
        lexical_size: how many the lexical arm returned.
        when_to_apply: the When-to-Apply match (0..1).
        authority: 1 when the rule is the authority on one of the task's topics.
        topic_overlap: Jaccard of the directive's and the task's topics (0..1).
    """
    value = max(0.0, semantic or 0.0)
    if lexical_rank is not None and lexical_size:
        value += LEXICAL_WEIGHT * (1.0 - lexical_rank / max(lexical_size, 1))
    if semantic is None and lexical_rank is not None:
        value += 0.25  # lexical evidence must carry a lexical-only ranking on its own
    # Declared metadata (a met When-to-Apply condition, authority on a task topic) is strong,
    # explicit evidence; the template's rules carry it, most foreign files do not.
    value += STRUCTURE_WEIGHT * (0.5 * when_to_apply + 0.3 * authority) + 0.15 * topic_overlap
    return round(value, 4)


def short_reason(
    *,
    shared_words: Iterable[str],
    condition: str | None,
    authority_topics: Iterable[str],
    topics: Iterable[str],
    semantic: float | None,
) -> str:
    """A few words saying why a directive was chosen: the task words it shares ("alembic,
    migration"), the condition it meets, the authority or topic it shares."""
    condition = (condition or "").strip()
    if condition:
        return "when " + _clip(condition, 28)
    words = list(shared_words)[:2]
    if words:
        return ", ".join(words)
    authority = sorted(authority_topics)[:1]
    if authority:
        return "authority: " + authority[0]
    shared = sorted(topics)[:1]
    if shared:
        return "topic: " + shared[0]
    return "similar" if semantic is not None and semantic > 0 else "top match"


def _clip(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters, with "…" when cut."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    cut = (head if text[limit - 1] == " " else head.rsplit(" ", 1)[0]).rstrip(" ,;:-")
    return (cut or text[: limit - 1]) + "…"
