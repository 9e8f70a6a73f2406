"""The built-in offline model: deterministic, no key, no network (DESIGN §4).

It is a pydantic-ai :class:`FunctionModel`, so it sits behind the same agents, schemas and
validators as any provider. It reads the JSON context block of the prompt
(:mod:`memory_core.llm.prompts`) and answers each task:

- **classify**: reuse the existing category most similar to the chunk (the larger of the
  embedding cosine between chunk and name, and the share of the name's words among the chunk's
  key words) when that similarity reaches the threshold, or when no new category is allowed;
  otherwise name a new category from the chunk's key words not already on its path.
- **select**: rank the options by similarity to the question, take ``count``; ranked_relevance
  and confidence follow the similarity. When the caller knows what the categories hold
  (:func:`~memory_core.llm.category_vectors.category_vectors`: the centroid of each category's chunk embeddings, by option label),
  the similarity is the question's cosine to that centroid, not to the category's name.
- **summarise**: extractive: the sentences most related to the question, kept in text order,
  within the target token count.
- **answer**: extractive: the passages closest to the question by embedding, then their
  sentences closest to it (embedding cosine plus shared words), each sentence said once, in
  text order, with the chunk ids they came from as citations.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memory_core.embed import Embedder
from memory_core.llm.category_vectors import current_category_vectors
from memory_core.llm.keyphrases import key_terms, key_words, overlap, sentences, word_stems
from memory_core.llm.prompts import CONTEXT_OPEN, extract_context
from memory_core.models import content_hash
from memory_core.tokens import TokenCounter

__all__ = ["OFFLINE_MODEL_NAME", "OfflineModel", "create_offline_model"]

OFFLINE_MODEL_NAME = "memoir-offline"
_CACHE_SIZE = 4096
_ANSWER_SENTENCES = 3
_ANSWER_PASSAGES = 2  # the sentences of an answer come from the passages closest to the question


class OfflineModel:
    """The offline model's logic; :attr:`model` is the pydantic-ai model to run agents with.

    Args:
        embedder: used for similarity between texts and category names.
        tokens: counts tokens for extractive summaries.
        reuse_threshold: similarity from which an existing category is reused.
    """

    def __init__(
        self, embedder: Embedder, tokens: TokenCounter, *, reuse_threshold: float = 0.35
    ) -> None:
        self.embedder = embedder
        self.tokens = tokens
        self.reuse_threshold = reuse_threshold
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self.model = FunctionModel(self._respond, model_name=OFFLINE_MODEL_NAME)

    # -- embedding cache ---------------------------------------------------------------------

    def remember(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Prime the cache with vectors the caller already computed (chunk embeddings)."""
        for text, vector in zip(texts, vectors, strict=True):
            self._put(content_hash(text), np.asarray(vector, dtype=np.float32))

    def _put(self, key: str, vector: np.ndarray) -> None:
        self._vectors[key] = vector
        self._vectors.move_to_end(key)
        while len(self._vectors) > _CACHE_SIZE:
            self._vectors.popitem(last=False)

    async def _embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [content_hash(t) for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self._vectors]
        if missing:
            fresh = await self.embedder.embed_documents([texts[i] for i in missing])
            for index, vector in zip(missing, fresh, strict=True):
                self._put(keys[index], np.asarray(vector, dtype=np.float32))
        return np.vstack([self._vectors[k] for k in keys]) if keys else np.zeros((0, 1))

    async def _similarities(self, text: str, options: Sequence[str]) -> list[float]:
        if not options:
            return []
        vectors = await self._embed([text, *options])
        cosines = vectors[1:] @ vectors[0]
        # A question counts every word; a chunk only its key words (else every name matches).
        text_words = set(word_stems(text)) if len(text) < 400 else set(key_words(text, 25))
        return [
            max(float(c), overlap(word_stems(name), text_words))
            for c, name in zip(cosines, options, strict=True)
        ]

    # -- the FunctionModel entry point -------------------------------------------------------

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        context = _first_context(messages)
        task = (context or {}).get("task")
        if context is None or task is None:
            output: dict[str, Any] = {"error": "no memoir context block in the prompt"}
        elif task == "classify":
            output = await self._classify(context)
        elif task == "select":
            output = await self._select(context)
        elif task == "summarise":
            output = self._summarise(context)
        elif task == "answer":
            output = await self._answer(context)
        else:
            output = {"error": f"unknown task {task!r}"}
        return ModelResponse(parts=[TextPart(json.dumps(output, ensure_ascii=False))])

    async def _classify(self, context: dict[str, Any]) -> dict[str, Any]:
        text = str(context.get("text", ""))
        options = [str(o) for o in context.get("options", [])]
        allow_new = bool(context.get("allow_new", True))
        scores = await self._similarities(text, options)
        if options:
            best = max(range(len(options)), key=lambda i: (scores[i], -i))
            if not allow_new or scores[best] >= self.reuse_threshold:
                return {"category": options[best], "is_new": False}
        path = [str(p) for p in context.get("path", [])]
        return {"category": _new_name(text, path, options, context), "is_new": True}

    async def _select(self, context: dict[str, Any]) -> dict[str, Any]:
        question = str(context.get("question", ""))
        options = [str(o) for o in context.get("options", [])]
        count = int(context.get("count", 1))
        scores = await self._similarities(question, options)
        known = current_category_vectors()
        if known and any(o in known for o in options):
            # An option without a centroid holds no chunk the centroids were computed from: a
            # category another writer has just created and not filled yet, or one created
            # after the centroids were read. It ranks below every option with chunks. (Falling
            # back to name similarity for all options, as when every option lacked one, made
            # one empty category misdirect every query: the reads missed acknowledged writes.)
            asked = (await self._embed([question]))[0]
            scores = [
                float(np.asarray(known[o]) @ asked) if o in known else scores[i] - 2.0
                for i, o in enumerate(options)
            ]
        order = sorted(range(len(options)), key=lambda i: (-scores[i], options[i]))[:count]
        return {
            "selected": [
                {
                    "category": options[i],
                    "ranked_relevance": max(1, min(10, 1 + round(9 * max(0.0, scores[i])))),
                    "confidence": round(max(0.0, min(1.0, scores[i])), 3),
                }
                for i in order
            ]
        }

    def _summarise(self, context: dict[str, Any]) -> dict[str, Any]:
        text = str(context.get("text", ""))
        target = max(1, int(context.get("target_tokens", 100)))
        question = set(word_stems(str(context.get("question", ""))))
        parts = sentences(text)
        ranked = sorted(
            range(len(parts)), key=lambda i: (-overlap(question, word_stems(parts[i])), i)
        )
        chosen: list[int] = []
        used = 0
        for index in ranked:
            cost = self.tokens.count(parts[index]) + 1
            if used + cost > target:
                continue
            chosen.append(index)
            used += cost
        summary = " ".join(parts[i] for i in sorted(chosen))
        if not summary and parts:
            summary = self.tokens.truncate(parts[0], target)
        return {"summary": summary}

    async def _answer(self, context: dict[str, Any]) -> dict[str, Any]:
        question_text = str(context.get("question", ""))
        question = set(word_stems(question_text))
        passages = [p for p in context.get("passages", []) if isinstance(p, dict)]
        texts = [str(p.get("text", "")) for p in passages]
        if not any(t.strip() for t in texts):
            return {
                "answer": "The stored passages do not answer this question.",
                "cited_chunk_ids": [],
            }
        vectors = await self._embed([question_text, *texts])
        closeness = vectors[1:] @ vectors[0]
        nearest = sorted(range(len(texts)), key=lambda i: (-float(closeness[i]), i))
        candidates: list[tuple[int, int, str]] = []  # (passage, position, sentence)
        seen: set[str] = set()
        for p_index in nearest[:_ANSWER_PASSAGES]:
            for s_index, sentence in enumerate(sentences(texts[p_index])):
                key = " ".join(sentence.split()).casefold()
                if key in seen:  # an answer never says the same sentence twice
                    continue
                seen.add(key)
                candidates.append((p_index, s_index, sentence))
        if not candidates:
            return {"answer": texts[nearest[0]].strip()[:500], "cited_chunk_ids": []}
        sentence_vectors = await self._embed([c[2] for c in candidates])
        cosines = sentence_vectors @ vectors[0]
        scored = []
        for (p_index, s_index, sentence), cosine in zip(candidates, cosines, strict=True):
            words = word_stems(sentence)
            shared = overlap(question, words) + 0.01 * len(question & set(words)) / (
                1 + math.log1p(len(words))
            )
            scored.append((float(cosine) + shared, p_index, s_index, sentence))
        best = sorted(scored, key=lambda s: (-s[0], s[1], s[2]))[:_ANSWER_SENTENCES]
        best.sort(key=lambda s: (nearest.index(s[1]), s[2]))
        cited = list(dict.fromkeys(str(passages[b[1]].get("chunk_id")) for b in best))
        return {"answer": " ".join(b[3] for b in best), "cited_chunk_ids": cited}


def _first_context(messages: list[ModelMessage]) -> dict[str, Any] | None:
    # The original prompt carries the context; retry prompts after it do not.
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            content = part.content if isinstance(part, UserPromptPart) else None
            if isinstance(content, str) and CONTEXT_OPEN in content:
                return extract_context(content)
    return None


def _new_name(text: str, path: list[str], options: list[str], context: dict[str, Any]) -> str:
    level = int(context.get("level", 1))
    words_per_name = 1 if level == 1 else 2
    taken = {o.casefold() for o in options}
    exclude = [w for name in path for w in word_stems(name)]
    candidates = key_terms(text, 12, exclude=exclude)
    for start in range(len(candidates)):
        name = " ".join(w.capitalize() for w in candidates[start : start + words_per_name])
        if name and name.casefold() not in taken:
            return name
    return f"General {level}" if f"general {level}" not in taken else f"Other {len(options) + 1}"


def create_offline_model(
    embedder: Embedder, tokens: TokenCounter, *, reuse_threshold: float = 0.35
) -> OfflineModel:
    """The offline model for ``embedder`` (its :attr:`OfflineModel.model` runs agents)."""
    return OfflineModel(embedder, tokens, reuse_threshold=reuse_threshold)
