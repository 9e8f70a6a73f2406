"""Real text and real MiniLM vectors for the PostgreSQL scale bench (``bench_pg.py --real-vectors``).

Text: the docstrings of the Python sources installed on the machine, read with ``ast`` (no
code is imported or run): CPython's standard library first (``/usr/lib/python3.X``, the PSF
licence), then the packages in this virtualenv's ``site-packages`` (each under its own
licence; nothing is copied into the repository). Each docstring is cleaned (whitespace
collapsed), split into chunks of at most ``WORDS_PER_CHUNK`` words, chunks under
``MIN_WORDS`` words dropped and exact duplicates dropped (the same docstring is vendored by
many packages). Files are read in sorted path order, so the corpus is the same for the same
installed packages; ``SOURCE`` lines name where each chunk came from.

Vectors: memoir's local embedder (all-MiniLM-L6-v2 int8 ONNX, 384 dims, offline), cached as
``.npy`` under ``bench/.cache/`` (not committed) with the chunk texts beside it, so a rerun
embeds nothing.

    .venv/bin/python bench/real_corpus.py [--chunks 8000] [--rate-only 1000]
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
import sysconfig
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "bench" / ".cache"
WORDS_PER_CHUNK = 60
MIN_WORDS = 12

__all__ = [
    "CACHE",
    "FixedQueryEmbedder",
    "available_vectors",
    "embed_cached",
    "load_chunks",
    "mixed_corpus",
    "real_queries",
    "source_roots",
]


def source_roots() -> list[Path]:
    """The standard library, then this interpreter's site-packages."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    purelib = Path(sysconfig.get_paths()["purelib"])
    return [stdlib, purelib]


def _docstrings(path: Path) -> Iterator[str]:
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                yield doc


def _chunks(doc: str) -> Iterator[str]:
    words = re.sub(r"\s+", " ", doc).strip().split(" ")
    for start in range(0, len(words), WORDS_PER_CHUNK):
        part = words[start : start + WORDS_PER_CHUNK]
        if len(part) >= MIN_WORDS:
            yield " ".join(part)


def iter_chunks() -> Iterator[tuple[str, str]]:
    """(source file, chunk text), deduplicated, in a stable order."""
    seen: set[bytes] = set()
    for root in source_roots():
        skip = root / "site-packages" if root.name.startswith("python3") else None
        for path in sorted(root.rglob("*.py")):
            if skip is not None and skip in path.parents:
                continue
            for doc in _docstrings(path):
                for text in _chunks(doc):
                    key = hashlib.blake2b(text.encode(), digest_size=12).digest()
                    if key in seen:
                        continue
                    seen.add(key)
                    yield str(path), text


def load_chunks(limit: int) -> list[tuple[str, str]]:
    """The first ``limit`` chunks (fewer if the machine has fewer), cached as JSON lines."""
    CACHE.mkdir(parents=True, exist_ok=True)
    cached = CACHE / "real_chunks.jsonl"
    if cached.exists():
        rows = [tuple(json.loads(line)) for line in cached.read_text().splitlines()]
        if len(rows) >= limit or cached.with_suffix(".complete").exists():
            return [(str(a), str(b)) for a, b in rows[:limit]]
    rows = []
    for row in iter_chunks():
        rows.append(row)
        if len(rows) >= limit:
            break
    cached.write_text("".join(json.dumps(r) + "\n" for r in rows))
    if len(rows) < limit:
        cached.with_suffix(".complete").write_text(str(len(rows)))
    return [(str(a), str(b)) for a, b in rows]


def embed_cached(texts: list[str], *, progress: bool = True, stop: int | None = None) -> np.ndarray:
    """MiniLM vectors of ``texts``, cached under ``bench/.cache`` by a digest of the texts;
    embedded in slices, each slice saved as it completes, so an interrupted run resumes.
    ``stop``: embed only the slices that cover the first ``stop`` texts (returns those)."""
    from memory_core.embed.onnx_minilm import MiniLMEncoder

    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    final = CACHE / f"minilm_{len(texts)}_{digest}.npy"
    if final.exists():
        return np.load(final)
    encoder = MiniLMEncoder()
    encoder.load_sync()
    parts = CACHE / f"minilm_{digest}_parts"
    parts.mkdir(parents=True, exist_ok=True)
    step = 2000
    out = []
    started = time.perf_counter()
    done_now = 0
    for start in range(0, len(texts), step):
        if stop is not None and start >= stop:
            return np.concatenate(out)[:stop]
        part = parts / f"{start:08d}.npy"
        if part.exists():
            out.append(np.load(part))
            continue
        vectors, _ = encoder.embed_counted_sync(texts[start : start + step])
        np.save(part, vectors)
        out.append(vectors)
        done_now += len(vectors)
        if progress:
            rate = done_now / (time.perf_counter() - started)
            print(
                f"embedded {start + len(vectors):,}/{len(texts):,} ({rate:,.0f} chunks/s)",
                file=sys.stderr,
                flush=True,
            )
    matrix = np.concatenate(out) if out else np.zeros((0, 384), dtype=np.float32)
    np.save(final, matrix)
    return matrix


def _parts_dir(texts: list[str]) -> Path:
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    return CACHE / f"minilm_{digest}_parts"


def available_vectors(at_least: int = 0) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The cached chunks and the contiguous prefix of them embedded so far (a background
    ``real_corpus.py`` run may still be adding slices); first embeds up to ``at_least``."""
    rows = load_chunks(10**9)
    if at_least:
        embed_cached([t for _, t in rows], stop=at_least)
    texts = [t for _, t in rows]
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    final = CACHE / f"minilm_{len(texts)}_{digest}.npy"
    if final.exists():
        return rows, np.load(final)
    out = []
    for part in sorted(_parts_dir(texts).glob("*.npy")):
        if int(part.stem) != sum(len(o) for o in out):
            break
        try:
            out.append(np.load(part))
        except (ValueError, OSError):  # a slice being written
            break
    matrix = np.concatenate(out) if out else np.zeros((0, 384), dtype=np.float32)
    return rows, matrix


def mixed_corpus(
    size: int, texts: list[str], real: np.ndarray, seed: int
) -> tuple[list[str], np.ndarray, int]:
    """``size`` chunks: the first ``min(size, len(real))`` are real (docstring text, its
    MiniLM vector); each further one is synthetic, drawn around two random real chunks a, b:
    text = the first half of a's words + the second half of b's words; vector =
    normalise(w * v_a + (1 - w) * v_b + n), w uniform in [0.2, 0.8], n Gaussian with
    standard deviation 0.02 per dimension (about 0.4 in norm, so a synthetic vector sits
    near the segment between two real ones, not on it). Returns texts, vectors and the
    number of real chunks."""
    n_real = min(size, len(real))
    rng = np.random.default_rng(seed)
    extra = size - n_real
    out_texts = list(texts[:n_real])
    vectors = np.empty((size, real.shape[1]), dtype=np.float32)
    vectors[:n_real] = real[:n_real]
    step = 100_000
    for start in range(0, extra, step):
        m = min(step, extra - start)
        a = rng.integers(0, len(real), m)
        b = rng.integers(0, len(real), m)
        w = rng.uniform(0.2, 0.8, (m, 1)).astype(np.float32)
        mixed = w * real[a] + (1 - w) * real[b]
        mixed += rng.normal(0, 0.02, mixed.shape).astype(np.float32)
        mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
        vectors[n_real + start : n_real + start + m] = mixed
        for i, j in zip(a.tolist(), b.tolist(), strict=True):
            wa, wb = texts[i].split(" "), texts[j].split(" ")
            out_texts.append(" ".join(wa[: len(wa) // 2] + wb[len(wb) // 2 :]))
    return out_texts, vectors, n_real


def real_queries() -> list[str]:
    """Real search queries: the headings of SQLite's C API docs and the Stack Exchange titles
    of ``bench/data`` (see ``bench/data/SOURCES.md``)."""
    data = ROOT / "bench" / "data"
    capi = [
        json.loads(x)["query"]
        for x in (data / "sqlite_capi_eval.jsonl").read_text().split("\n")
        if x
    ]
    stack = [
        json.loads(x)["title"]
        for x in (data / "stackexchange_topics.jsonl").read_text().split("\n")
        if x
    ]
    return capi + stack


class FixedQueryEmbedder:
    """An :class:`~memory_core.embed.base.Embedder` that answers queries embedded beforehand
    (MiniLM, cached), so search latency measures the stores, not the model."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self._vectors = vectors

    @property
    def embedder_id(self) -> str:
        return "local:all-MiniLM-L6-v2-int8"

    @property
    def dimension(self) -> int:
        return 384

    def is_ready(self) -> bool:
        return True

    def start_loading(self) -> None:
        return None

    async def ensure_loaded(self) -> None:
        return None

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.vstack([self._vectors[t] for t in texts])

    async def embed_query(self, text: str) -> np.ndarray:
        return self._vectors[text]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=None, help="embed the first N chunks")
    parser.add_argument("--rate-only", type=int, default=0, help="embed N chunks, print the rate")
    args = parser.parse_args()
    started = time.perf_counter()
    rows = load_chunks(10**9)
    words = sum(len(t.split()) for _, t in rows)
    sources = len({s for s, _ in rows})
    print(
        f"{len(rows):,} chunks ({words / max(1, len(rows)):.0f} words on average) from "
        f"{sources:,} files in {time.perf_counter() - started:.1f} s"
    )
    if args.rate_only:
        from memory_core.embed.onnx_minilm import MiniLMEncoder

        encoder = MiniLMEncoder()
        encoder.load_sync()
        texts = [t for _, t in rows[: args.rate_only]]
        started = time.perf_counter()
        _, pieces = encoder.embed_counted_sync(texts)
        took = time.perf_counter() - started
        print(
            f"MiniLM int8 ONNX: {len(texts) / took:,.0f} chunks/s "
            f"({pieces / len(texts):.0f} word pieces per chunk, 2 threads)"
        )
        return
    matrix = embed_cached([t for _, t in rows], stop=args.chunks)
    print(f"vectors {matrix.shape} in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
