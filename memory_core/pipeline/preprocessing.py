"""Multimodal preprocessing for the memorize pipeline (seed 004 §8.1): text out of files.

- PDF: the text layer of every page (pypdf); a page without one (a scan) is read by the local
  OCR engine from the page's embedded images. Each page is a segment, so an item's evidence
  carries its page number.
- Image: local OCR (RapidOCR on onnxruntime; its models ship inside the wheel, nothing is
  downloaded), plus a caption when the preprocess step's profile is a configured vision model.
- Audio / video: a transcript only through a configured provider profile (a pydantic-ai model
  that accepts the media); the offline model has none. The model is asked for a time at the
  start of each line; each timed line is a segment carrying its time (``start_s``, ``end_s``,
  ``timestamp``), so an item's evidence names when it was said as well as its span.

What cannot run (no engine installed, no profile configured, an unreadable file, a provider
that fails) is reported as a missing capability with the reason and the fix; the resource is
stored all the same.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memory_core.errors import ModelError
from memory_core.pipeline.llm_calls import profile_model
from memory_core.pipeline.profiles import LayerProfile
from memory_core.pipeline.transcript import transcript_cues

__all__ = [
    "Preprocessed",
    "describe_media",
    "ocr_available",
    "ocr_image",
    "pdf_available",
    "preprocess_file",
]

OCR_HINT = "pip install 'memoir-mcp[ocr]' (rapidocr-onnxruntime) for local OCR"
CAPTION_HINT = (
    "or configure a vision model for the preprocess role "
    "(role_profiles={'preprocess': '<profile>'}) to caption images"
)
AUDIO_HINT = (
    "configure a provider profile that accepts audio for the preprocess role "
    "(role_profiles={'preprocess': '<profile>'}); the offline model cannot transcribe"
)
_CAPTION_PROMPT = "Describe this image for a memory store: what it shows and any text in it."
_TRANSCRIBE_PROMPT = (
    "Transcribe the speech in this recording verbatim, one line per utterance, each line "
    "starting with the time it begins as [hh:mm:ss], e.g. [00:01:05] We ship on Tuesday."
)


@dataclass
class Preprocessed:
    """Text found in a file, its segments (``start``/``end`` into the text, ``page`` for PDFs,
    ``start_s``/``end_s``/``timestamp`` for timed transcript lines), artifact summaries, the
    capabilities that could not run, and LLM usage."""

    text: str = ""
    segments: list[dict[str, Any]] = field(default_factory=list)
    artifacts: dict[str, Any] = field(default_factory=dict)
    missing: list[dict[str, str]] = field(default_factory=list)
    usage: list[dict[str, Any]] = field(default_factory=list)

    def add(self, text: str, **where: Any) -> None:
        """Append a block of text as one segment (blocks are separated by a blank line)."""
        if not text.strip():
            return
        start = len(self.text) + (2 if self.text else 0)
        self.text = f"{self.text}\n\n{text}" if self.text else text
        self.segments.append({**where, "start": start, "end": start + len(text)})

    def add_transcript(self, text: str, **where: Any) -> int:
        """Append a transcript; each timed line is its own segment with its time. Returns the
        number of timed lines (0: one untimed segment, as :meth:`add`)."""
        cues = transcript_cues(text)
        if not cues:
            self.add(text, **where)
            return 0
        base = len(self.text) + (2 if self.text else 0)
        self.text = f"{self.text}\n\n{text}" if self.text else text
        lead = text[: cues[0].stamp_at].rstrip()
        if any(ch.isalpha() for ch in lead):  # words before the first time: untimed
            self.segments.append({**where, "start": base, "end": base + len(lead)})
        for cue in cues:
            timed: dict[str, Any] = {"timestamp": cue.stamp, "start_s": cue.start_s}
            if cue.end_s is not None:
                timed["end_s"] = cue.end_s
            self.segments.append(
                {**where, **timed, "start": base + cue.start, "end": base + cue.end}
            )
        return len(cues)


def pdf_available() -> bool:
    try:
        import pypdf  # noqa: F401
    except ImportError:
        return False
    return True


def ocr_available() -> bool:
    try:
        import rapidocr_onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


_ENGINE: Any = None
_ENGINE_LOCK = threading.Lock()


def _engine() -> Any:
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            from rapidocr_onnxruntime import RapidOCR  # type: ignore[import-untyped]

            # "max": scale the long side down to 960 px. The package default ("min", 736)
            # blows a wide text strip up to thousands of pixels and takes seconds per image.
            _ENGINE = RapidOCR(
                det_limit_type="max",
                det_limit_side_len=960,
                intra_op_num_threads=1,
                inter_op_num_threads=1,
            )
        return _ENGINE


def ocr_image(data: bytes) -> list[dict[str, Any]]:
    """Text lines of an image, top to bottom: ``{"text", "score", "box"}``.

    Raises:
        ValueError: the bytes are not an image the engine can decode.
    """
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(data)).convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"not a decodable image ({exc})") from exc
    found, _elapsed = _engine()(np.asarray(image)[:, :, ::-1], use_cls=False)
    rows = sorted(
        ((float(box[0][1]), float(box[0][0]), n), str(text), float(score), box)
        for n, (box, text, score) in enumerate(found or [])
    )
    lines = [
        {"text": text, "score": round(score, 3), "box": [[float(v) for v in p] for p in box]}
        for _corner, text, score, box in rows
    ]
    return lines


def describe_media(
    profile: LayerProfile, data: bytes, mime: str, prompt: str
) -> tuple[str, dict[str, Any]]:
    """One pydantic-ai call that sends the media itself (caption or transcript).

    Raises:
        ModelError: the model failed (names the profile and the model).
    """
    from pydantic_ai import Agent, BinaryContent

    model = profile_model(profile)  # the profile's own key and URL, like every other LLM step
    agent: Agent[None, str] = Agent(model, output_type=str, retries=max(profile.retries, 1))
    try:
        result = agent.run_sync(
            [prompt, BinaryContent(data=data, media_type=mime)],
            model_settings={"temperature": profile.temperature, "timeout": profile.timeout_s},
        )
    except Exception as exc:  # the report names the profile and the model
        raise ModelError(
            f"llm profile {profile.name!r} ({profile.model_label}) failed on {mime}: {exc}",
            hint="use a model that accepts this media type, or set the profile to 'offline'",
        ) from exc
    usage = result.usage
    return str(result.output), {
        "profile": profile.name,
        "model": profile.model_label,
        "requests": usage.requests,
        "input_tokens": usage.input_tokens or 0,
        "output_tokens": usage.output_tokens or 0,
    }


def _pdf(data: bytes, out: Preprocessed) -> None:
    if not pdf_available():
        out.missing.append({"capability": "pdf_text", "hint": "pip install pypdf"})
        return
    import pypdf
    from pypdf.errors import PyPdfError

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        pages = list(reader.pages)
    except (PyPdfError, ValueError, OSError) as exc:
        out.missing.append(
            {"capability": "pdf_text", "hint": f"the PDF could not be read ({exc}); re-export it"}
        )
        return
    scanned: list[int] = []
    for number, page in enumerate(pages, start=1):
        text = (page.extract_text() or "").strip()
        if text:
            out.add(text, page=number)
            continue
        scanned.append(number)
        if not ocr_available():
            continue
        for image in page.images:
            try:
                lines = ocr_image(image.data)
            except ValueError:
                continue
            out.add("\n".join(line["text"] for line in lines), page=number, source="ocr")
    out.artifacts["pdf_text"] = {"pages": len(pages), "chars": len(out.text)}
    if scanned:
        out.artifacts["pdf_text"]["pages_without_text_layer"] = scanned
        if not ocr_available():
            out.missing.append(
                {"capability": "ocr", "hint": f"pages {scanned} have no text layer; {OCR_HINT}"}
            )
    if not out.text:
        out.missing.append({"capability": "pdf_text", "hint": "the PDF holds no extractable text"})


def _image(data: bytes, mime: str, llm: LayerProfile, out: Preprocessed) -> None:
    ocr_error = None
    if ocr_available():
        try:
            lines = ocr_image(data)
        except ValueError as exc:
            ocr_error = f"OCR failed: {exc}"
        else:
            out.add("\n".join(line["text"] for line in lines), source="ocr")
            out.artifacts["ocr"] = {"lines": len(lines), "chars": len(out.text)}
    else:
        ocr_error = OCR_HINT
    captioned = _media_call(llm, data, mime, _CAPTION_PROMPT, "caption", out)
    if ocr_error and not captioned:
        out.missing.append({"capability": "ocr", "hint": f"{ocr_error}; {CAPTION_HINT}"})


def _media_call(
    llm: LayerProfile, data: bytes, mime: str, prompt: str, kind: str, out: Preprocessed
) -> bool:
    if llm.is_offline:
        return False
    try:
        text, usage = describe_media(llm, data, mime, prompt)
    except ModelError as exc:
        out.missing.append({"capability": kind, "hint": f"{exc} ({exc.hint})"})
        return False
    out.usage.append(usage)
    out.artifacts[kind] = {"profile": llm.name, "chars": len(text)}
    if kind == "transcription":
        out.artifacts[kind]["timed_lines"] = out.add_transcript(text.strip(), source=kind)
    else:
        out.add(text.strip(), source=kind)
    return True


def preprocess_file(read: Callable[[], bytes], mime: str, llm: LayerProfile) -> Preprocessed | None:
    """Text out of a PDF, an image or a recording (``None``: not a kind this step handles).

    ``read`` returns the file's bytes (called only for a kind handled here).
    """
    out = Preprocessed()
    if mime == "application/pdf":
        _pdf(read(), out)
    elif mime.startswith("image/"):
        _image(read(), mime, llm, out)
    elif mime.startswith(("audio/", "video/")):
        if llm.is_offline:
            out.missing.append({"capability": "transcription", "hint": AUDIO_HINT})
        else:
            _media_call(llm, read(), mime, _TRANSCRIBE_PROMPT, "transcription", out)
    else:
        return None
    return out
