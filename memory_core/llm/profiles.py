"""Named model profiles, chosen per step (DESIGN §4).

A profile is a ``'provider:model'`` string (or ``"offline"``) with a temperature, a timeout and a
retry count. ``settings.llm`` gives the defaults; ``settings.llm.profiles`` may define named
profiles and map steps to them, e.g. in ``memoir.toml``::

    [llm.profiles.fast]
    model = "openai:gpt-4o-mini"
    temperature = 0.2

    [llm.profiles.classify]
    profile = "fast"            # the classify step uses the "fast" profile

    [llm.profiles.answer]
    model = "anthropic:claude-sonnet-4-5"
    timeout_s = 90

In deterministic mode (``llm.deterministic``, the default) every temperature is 0 and the
parameters of each step are recorded with the run (:meth:`ModelProfile.record`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from memory_core.config import LLMSettings
from memory_core.errors import ConfigError

__all__ = [
    "OFFLINE_MODEL",
    "STEPS",
    "ModelProfile",
    "Step",
    "profile_names",
    "resolve_named_profile",
    "resolve_profile",
    "resolve_profiles",
]

Step = Literal["classify", "traverse", "summarise", "answer"]
STEPS: tuple[str, ...] = get_args(Step)
OFFLINE_MODEL = "offline"
_FIELDS = {"model", "temperature", "timeout_s", "retries", "profile"}


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """The model and its parameters for one step."""

    name: str
    step: str
    model: str
    temperature: float
    timeout_s: float
    retries: int
    deterministic: bool

    @property
    def is_offline(self) -> bool:
        return self.model == OFFLINE_MODEL

    def model_settings(self) -> dict[str, Any]:
        """pydantic-ai ``ModelSettings`` for this profile."""
        # request_timeout is enforced by pydantic-ai for every model (provider timeouts are not).
        return {"temperature": self.temperature, "request_timeout": self.timeout_s}

    def record(self) -> dict[str, Any]:
        """The provider parameters, as logged with each run."""
        return {
            "profile": self.name,
            "model": self.model,
            "temperature": self.temperature,
            "timeout_s": self.timeout_s,
            "retries": self.retries,
            "deterministic": self.deterministic,
        }


def _entry(profiles: dict[str, dict[str, Any]], name: str, seen: tuple[str, ...]) -> dict[str, Any]:
    if name in seen:
        raise ConfigError(
            f"llm profile {name!r} refers to itself through {' -> '.join((*seen, name))}",
            hint="break the cycle in [llm.profiles]",
        )
    entry = profiles.get(name)
    if entry is None:
        raise ConfigError(
            f"unknown llm profile {name!r}",
            hint="define it under [llm.profiles." + name + "] or fix the reference",
        )
    unknown = set(entry) - _FIELDS
    if unknown:
        raise ConfigError(
            f"llm profile {name!r} has unknown keys {sorted(unknown)}",
            hint="use only " + ", ".join(sorted(_FIELDS)),
        )
    if "profile" in entry:
        base = _entry(profiles, str(entry["profile"]), (*seen, name))
        return {**base, **{k: v for k, v in entry.items() if k != "profile"}}
    return dict(entry)


def profile_names(llm: LLMSettings) -> list[str]:
    """The profile names ``[llm]`` defines: ``default`` (``[llm]`` itself) and each
    ``[llm.profiles.NAME]``."""
    return sorted({"default", *llm.profiles})


def _build(llm: LLMSettings, values: dict[str, Any], name: str, step: str) -> ModelProfile:
    try:
        temperature = float(values.get("temperature", llm.temperature))
        timeout_s = float(values.get("timeout_s", llm.timeout_s))
        retries = int(values.get("retries", llm.retries))
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"llm profile for {step!r} has a non-numeric value: {exc}",
            hint="temperature and timeout_s are numbers, retries an integer",
        ) from exc
    if timeout_s <= 0 or retries < 0 or not 0 <= temperature <= 2:
        raise ConfigError(
            f"llm profile for {step!r} is out of range (temperature={temperature}, "
            f"timeout_s={timeout_s}, retries={retries})",
            hint="0 <= temperature <= 2, timeout_s > 0, retries >= 0",
        )
    return ModelProfile(
        name=name,
        step=step,
        model=str(values.get("model", llm.model)),
        temperature=0.0 if llm.deterministic else temperature,
        timeout_s=timeout_s,
        retries=retries,
        deterministic=llm.deterministic,
    )


def resolve_profile(llm: LLMSettings, step: str) -> ModelProfile:
    """The profile for ``step`` (classify, traverse, summarise, answer).

    Raises:
        ConfigError: unknown step, an unknown or cyclic profile reference, or a bad value.
    """
    if step not in STEPS:
        raise ConfigError(f"unknown llm step {step!r}", hint="use one of " + ", ".join(STEPS))
    values: dict[str, Any] = {}
    name = "default"
    if step in llm.profiles:
        values = _entry(llm.profiles, step, ())
        name = str(llm.profiles[step].get("profile", step))
    return _build(llm, values, name, step)


def resolve_named_profile(llm: LLMSettings, name: str) -> ModelProfile:
    """The profile called ``name`` (for other users of memoir's profiles, e.g. the memory
    layer): ``[llm.profiles.NAME]`` with its ``profile =`` references followed and its unset
    values taken from ``[llm]``; ``default``, unless such a table defines it, is ``[llm]``
    itself. Deterministic mode forces its temperature to 0, as for the steps.

    Raises:
        ConfigError: no such profile (the message lists the defined ones), a cyclic
            reference, or a bad value.
    """
    if name not in llm.profiles and name != "default":
        raise ConfigError(
            f"memoir defines no llm profile {name!r} (defined: {', '.join(profile_names(llm))})",
            hint=f"add [llm.profiles.{name}] with a model to memoir.toml, or use a defined name",
        )
    values = _entry(llm.profiles, name, ()) if name in llm.profiles else {}
    return _build(llm, values, name, step=name)


def resolve_profiles(llm: LLMSettings) -> dict[str, ModelProfile]:
    """Every step's profile (checks the whole configuration at once)."""
    return {step: resolve_profile(llm, step) for step in STEPS}
