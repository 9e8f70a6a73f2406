"""Importance of a new memory: the spec's heuristics over a category classifier.

Spec ("Importance Heuristics"), on top of a base value (``memories.base_importance``):

- +0.5 when the user explicitly asks to save or pin (and ``manually_saved`` is set);
- +0.3 for persistent preferences, commitments or goals;
- +0.2 when metadata extraction yields entities/tags with ``metadata_confidence >= 0.6``;
- -0.1 for ephemeral or low-signal chit-chat;

clamped to [0, 1]. Repeats add ``repeat_boost`` per merge, up to ``repeat_boost_cap``.

The category comes from a classifier. The default is local and offline
(:func:`classify_offline`: cue phrases with a confidence, deterministic). A configured
pydantic-ai model (``memories.importance_model = "provider:model"``) can classify instead
(:class:`ModelClassifier`); if it fails, the offline answer is used and the result carries a
visible warning, never a silent fallback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, cast

from pydantic import BaseModel, Field

from memory_core.errors import ModelError
from memory_core.llm.keyphrases import STOPWORDS

__all__ = [
    "CHIT_CHAT",
    "Category",
    "Classification",
    "ImportanceJudgement",
    "ModelClassifier",
    "classify_offline",
    "explicit_pin_request",
    "explicit_save_request",
    "importance_score",
    "repeat_boost",
]

Category = Literal["preference", "commitment", "goal", "fact", "chit_chat"]
CHIT_CHAT: Category = "chit_chat"
LASTING: frozenset[str] = frozenset({"preference", "commitment", "goal"})

_SAVE = re.compile(
    r"^\s*(?:please\s+)?(?:remember|don'?t\s+forget|do\s+not\s+forget|note\s+(?:that|down)|"
    r"make\s+a\s+note|save\s+(?:this|that)|keep\s+in\s+mind|memori[sz]e|for\s+the\s+record)\b",
    re.IGNORECASE,
)
_PIN = re.compile(r"\b(?:pin\s+(?:this|that|it)|always\s+remember|never\s+forget)\b", re.IGNORECASE)
_CUES: dict[str, list[tuple[re.Pattern[str], float]]] = {
    "preference": [
        (
            re.compile(
                r"\b(?:i|we|user|they)\s+(?:really\s+)?(?:prefers?|likes?|loves?|hates?|dislikes?|enjoys?|would\s+rather)\b"
            ),
            0.9,
        ),
        (re.compile(r"\b(?:prefers?|preferred|preference|favou?rite)\b"), 0.8),
        (
            re.compile(r"\b(?:always|never)\s+(?:use|uses|write|call|run|put|add|commit|deploy)\b"),
            0.8,
        ),
        (re.compile(r"\b(?:don'?t|do\s+not)\s+(?:like|want|use)\b"), 0.75),
        (re.compile(r"\binstead\s+of\b"), 0.6),
    ],
    "commitment": [
        (
            re.compile(
                r"\b(?:i|we)(?:'ll|\s+will|\s+shall|\s+promise|\s+commit(?:ted)?\s+to|'m\s+going\s+to|\s+am\s+going\s+to|\s+agreed\s+to)\b"
            ),
            0.85,
        ),
        (re.compile(r"\b(?:decided|decision|agreed|deadline|due\s+(?:by|on)|remind\s+me)\b"), 0.8),
        (
            re.compile(
                r"\b(?:every|each)\s+(?:day|week|month|monday|tuesday|wednesday|thursday|friday|saturday|sunday|morning|evening)\b|\b(?:weekly|daily|monthly|standup|stand-up|recurring)\b"
            ),
            0.8,
        ),
        (re.compile(r"\b(?:meeting|appointment|call)\s+(?:is\s+)?(?:on|at)\b"), 0.75),
    ],
    "goal": [
        (re.compile(r"\b(?:goal|objective|aim|milestone|target|roadmap)\b"), 0.85),
        (
            re.compile(
                r"\b(?:want|plan|planning|hope|trying|need)\s+to\s+(?:build|learn|ship|finish|launch|migrate|write|get|reach|become|improve|move)\b"
            ),
            0.8,
        ),
        (re.compile(r"\bworking\s+(?:on|towards?)\b"), 0.6),
    ],
}
_CHIT_CHAT = re.compile(
    r"^\s*(?:hi|hello|hey|thanks|thank\s+you|thx|ok(?:ay)?|cool|great|nice|lol|haha|sure|yes|no|yep|nope|"
    r"bye|good\s+(?:morning|night|evening)|sounds\s+good|got\s+it|np|you'?re\s+welcome)\b",
    re.IGNORECASE,
)
_CONTENT = re.compile(r"[^\W\d_]{3,}", re.UNICODE)


class ImportanceJudgement(BaseModel):
    """What a model says about one memory (the LLM classifier's output type)."""

    category: Category = Field(
        description="preference, commitment (incl. recurring meetings and decisions), goal, "
        "fact, or chit_chat (greetings, thanks, small talk)"
    )
    confidence: float = Field(0.8, ge=0, le=1)
    explicit_save: bool = Field(
        False, description="True when the user explicitly asks to remember or save it."
    )


@dataclass(frozen=True, slots=True)
class Classification:
    category: Category
    confidence: float
    explicit_save: bool
    explicit_pin: bool
    model: str
    warning: str | None = None


def explicit_save_request(text: str) -> bool:
    return bool(_SAVE.search(text)) or explicit_pin_request(text)


def explicit_pin_request(text: str) -> bool:
    return bool(_PIN.search(text))


def classify_offline(text: str) -> Classification:
    """The local classifier: the category whose cue phrases match best (deterministic)."""
    lowered = text.lower()
    best: tuple[float, Category] = (0.0, "fact")
    for category, cues in _CUES.items():
        score = max((weight for pattern, weight in cues if pattern.search(lowered)), default=0.0)
        if score > best[0]:
            best = (score, cast(Category, category))
    content_words = [w for w in _CONTENT.findall(lowered) if w not in STOPWORDS]
    if best[0] == 0.0 and (
        (_CHIT_CHAT.match(lowered) and len(content_words) <= 3) or not content_words
    ):
        best = (0.8, CHIT_CHAT)
    confidence = best[0] or 0.5
    return Classification(
        category=best[1],
        confidence=confidence,
        explicit_save=explicit_save_request(text),
        explicit_pin=explicit_pin_request(text),
        model="offline",
    )


def importance_score(
    *,
    base: float,
    category: str,
    manually_saved: bool,
    metadata_confidence: float,
    has_metadata: bool,
) -> float:
    """The spec's heuristic sum, clamped to [0, 1]."""
    value = base
    if manually_saved:
        value += 0.5
    if category in LASTING:
        value += 0.3
    if has_metadata and metadata_confidence >= 0.6:
        value += 0.2
    if category == CHIT_CHAT:
        value -= 0.1
    return round(min(1.0, max(0.0, value)), 6)


def repeat_boost(repeat_count: int, *, step: float, cap: float) -> float:
    """``f(repeat_count)`` of the spec: ``step`` per repeat, at most ``cap``."""
    return min(cap, step * max(0, repeat_count))


_INSTRUCTIONS = (
    "Classify one memory an assistant may keep about its user. Categories: preference (likes, "
    "dislikes, how they want things done), commitment (promises, decisions, deadlines, "
    "recurring meetings), goal (what they are working towards), fact (anything else worth "
    "keeping), chit_chat (greetings, thanks, small talk). Set explicit_save when the user "
    "explicitly asks to remember or save it."
)


class ModelClassifier:
    """Classify with a pydantic-ai model (a provider string, ``TestModel`` or ``FunctionModel``).

    Args:
        model: a ``'provider:model'`` string or a pydantic-ai ``Model``.
        timeout_s: per-request timeout.
        retries: output validation retries.
    """

    def __init__(self, model: Any, *, timeout_s: float = 30.0, retries: int = 2) -> None:
        from pydantic_ai import Agent, PromptedOutput

        self._model = model
        self._settings: Any = {"temperature": 0.0, "request_timeout": timeout_s}
        self._agent: Agent[None, ImportanceJudgement] = Agent(
            output_type=PromptedOutput(ImportanceJudgement),
            instructions=_INSTRUCTIONS,
            retries=retries,
            name="memoir-memory-importance",
        )

    @property
    def name(self) -> str:
        model = self._model
        return model if isinstance(model, str) else f"{model.system}:{model.model_name}"

    async def classify(self, text: str) -> Classification:
        """The model's judgement, else the offline one with a warning saying why.

        Never raises for a failing model: the memory is still stored, and the caller shows
        the warning.
        """
        from pydantic_ai.exceptions import AgentRunError, UserError

        try:
            result = await self._agent.run(
                f"Memory:\n{text}", model=self._model, model_settings=self._settings
            )
        except (AgentRunError, UserError, ModelError, OSError, ValueError) as exc:
            offline = classify_offline(text)
            return Classification(
                offline.category,
                offline.confidence,
                offline.explicit_save,
                offline.explicit_pin,
                model="offline",
                warning=f"importance model {self.name} failed ({type(exc).__name__}: "
                f"{str(exc)[:160]}); used the offline classifier",
            )
        judged = result.output
        return Classification(
            category=judged.category,
            confidence=judged.confidence,
            explicit_save=judged.explicit_save or explicit_save_request(text),
            explicit_pin=explicit_pin_request(text),
            model=self.name,
        )
