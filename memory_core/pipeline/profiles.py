"""Named LLM profiles for the memory layer (seed 004 §4.2). Pure.

``llm_providers`` maps profile names to settings; ``default`` is required. A profile's ``model``
is ``"offline"`` (the built-in deterministic path, no key), a pydantic-ai ``'provider:model'``
string, or a pydantic-ai ``Model`` instance (``TestModel`` / ``FunctionModel`` in tests).
Credentials are references only (``api_key_env="OPENAI_API_KEY"``); a literal secret is refused,
so the summary written to ``service_meta`` never holds one. A step's profile is, in order: its
``llm_profile`` config, the role's default (``role_profiles``), then ``default``.

A profile may reuse one of memoir's own profiles (``memoir.toml``'s ``[llm]`` and
``[llm.profiles.NAME]``) with ``memoir_profile = "NAME"``: it takes that profile's model,
temperature, timeout and retries as memoir resolves them (``default`` is ``[llm]`` itself), and
the keys written beside ``memoir_profile`` override them. The memoir settings are passed in
(``memoir_llm``); a reference without them, or to a name memoir does not define, is an error
naming both profiles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memory_core.config import LLMSettings
from memory_core.errors import ConfigError
from memory_core.llm.profiles import profile_names, resolve_named_profile
from memory_core.redaction import redact_text

__all__ = ["OFFLINE", "LayerProfile", "parse_profiles", "redacted_summary", "resolve_step_profile"]

OFFLINE = "offline"
_ALLOWED = {
    "model", "api_key_env", "base_url", "temperature", "max_tokens", "timeout_s", "retries",
    "output_mode", "memoir_profile",
}  # fmt: skip
_SECRET_WORDS = ("key", "secret", "token", "password")


@dataclass(frozen=True)
class LayerProfile:
    name: str
    model: Any  # "offline", "provider:model", or a pydantic-ai Model
    api_key_env: str | None = None
    base_url: str | None = None
    temperature: float = 0.0
    max_tokens: int | None = None
    timeout_s: float = 60.0
    retries: int = 1
    output_mode: str = "tool"
    memoir_profile: str | None = None  # the memoir.toml profile it reuses, if any

    @property
    def is_offline(self) -> bool:
        return isinstance(self.model, str) and self.model == OFFLINE

    @property
    def model_label(self) -> str:
        if isinstance(self.model, str):
            return self.model
        name = getattr(self.model, "model_name", None) or type(self.model).__name__
        return f"{type(self.model).__name__}:{name}"

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": self.model_label,
            "temperature": self.temperature,
            "timeout_s": self.timeout_s,
            "retries": self.retries,
            "output_mode": self.output_mode,
        }
        if self.api_key_env:
            out["api_key"] = {"env": self.api_key_env}
        if self.base_url:  # a URL may carry a password or a key: never stored as given
            out["base_url"] = redact_text(self.base_url)
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.memoir_profile is not None:
            out["memoir_profile"] = self.memoir_profile
        return out


def _memoir_values(name: str, reference: Any, memoir_llm: LLMSettings | None) -> dict[str, Any]:
    """The values of the memoir profile that layer profile ``name`` reuses."""
    if not isinstance(reference, str) or not reference:
        raise ConfigError(
            f"llm profile {name!r} has memoir_profile={reference!r}, not a profile name",
            hint='name a profile of memoir.toml\'s [llm], e.g. memoir_profile = "default"',
        )
    if memoir_llm is None:
        raise ConfigError(
            f"llm profile {name!r} reuses the memoir profile {reference!r}, but no memoir "
            "settings were given",
            hint="pass memoir_llm=load_settings().llm to MemoryService.create (the memoir CLI "
            "and MCP server pass the [llm] of the memoir.toml they run with)",
        )
    if reference != "default" and reference not in memoir_llm.profiles:
        raise ConfigError(
            f"llm profile {name!r} reuses the memoir profile {reference!r}, which memoir.toml "
            f"does not define (defined: {', '.join(profile_names(memoir_llm))})",
            hint=f"add [llm.profiles.{reference}] to memoir.toml or name a defined profile",
        )
    memoir = resolve_named_profile(memoir_llm, reference)
    return {
        "model": memoir.model,
        "temperature": memoir.temperature,
        "timeout_s": memoir.timeout_s,
        "retries": memoir.retries,
    }


def parse_profiles(
    llm_providers: Mapping[str, Any] | None, memoir_llm: LLMSettings | None = None
) -> dict[str, LayerProfile]:
    """Profiles from the user's mapping (``None``: one offline ``default``).

    ``memoir_llm`` is memoir's ``[llm]`` settings, which entries with ``memoir_profile`` reuse.

    Raises:
        ConfigError: no ``default`` (an empty mapping included), an unknown key, a literal
            secret, a bad value, or a ``memoir_profile`` that is not defined.
    """
    raw = dict(llm_providers) if llm_providers is not None else {"default": {"model": OFFLINE}}
    if "default" not in raw:
        raise ConfigError(
            f"llm_providers has no 'default' profile (got {sorted(raw)})",
            hint='add "default": {"model": "offline"} or a provider model, or pass '
            "llm_providers=None for the offline default",
        )
    out: dict[str, LayerProfile] = {}
    for name, entry in raw.items():
        if isinstance(entry, str) or not isinstance(entry, Mapping):
            entry = {"model": entry}
        unknown = sorted(set(entry) - _ALLOWED)
        secrets = [k for k in unknown if any(w in k.lower() for w in _SECRET_WORDS)]
        if secrets:
            raise ConfigError(
                f"llm profile {name!r} holds a literal credential in {secrets}",
                hint="store the secret in an environment variable and pass its name as "
                "api_key_env (e.g. api_key_env='OPENAI_API_KEY')",
            )
        if unknown:
            raise ConfigError(
                f"llm profile {name!r} has unknown keys {unknown}",
                hint="use only " + ", ".join(sorted(_ALLOWED)),
            )
        reference = entry.get("memoir_profile")
        if "memoir_profile" in entry:
            # the memoir profile's values, then the keys written beside the reference
            entry = {
                **_memoir_values(name, reference, memoir_llm),
                **{k: v for k, v in entry.items() if k != "memoir_profile"},
            }
        if "model" not in entry:
            raise ConfigError(
                f"llm profile {name!r} has no model",
                hint='set model = "offline", a provider model, or memoir_profile = "NAME"',
            )
        try:
            profile = LayerProfile(
                name=name,
                model=entry["model"],
                api_key_env=entry.get("api_key_env"),
                base_url=entry.get("base_url"),
                temperature=float(entry.get("temperature", 0.0)),
                max_tokens=None if entry.get("max_tokens") is None else int(entry["max_tokens"]),
                timeout_s=float(entry.get("timeout_s", 60.0)),
                retries=int(entry.get("retries", 1)),
                output_mode=str(entry.get("output_mode", "tool")),
                memoir_profile=None if reference is None else str(reference),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"llm profile {name!r} has a bad value: {exc}",
                hint="temperature and timeout_s are numbers; max_tokens and retries integers",
            ) from exc
        out[name] = profile
    return out


def redacted_summary(profiles: Mapping[str, LayerProfile]) -> dict[str, Any]:
    return {name: profiles[name].summary() for name in sorted(profiles)}


def resolve_step_profile(
    step_config: Mapping[str, Any], role: str, role_profiles: Mapping[str, str]
) -> str:
    """The profile name for a step: explicit ``llm_profile`` > role default > ``default``."""
    explicit = step_config.get("llm_profile")
    if explicit:
        return str(explicit)
    return role_profiles.get(role, "default")
