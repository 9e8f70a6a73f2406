"""Multimodal preprocessing in memorize (seed 004 §8.1): a real PDF (pypdf, page numbers in the
evidence), a real PNG through the local OCR engine (RapidOCR, models inside its wheel), a
scanned PDF page read by OCR, captions and transcripts only through a configured profile
(pydantic-ai FunctionModel receiving the media), and missing capabilities reported with the
resource still stored; a timed transcript of a real WAV file gives evidence with its time. On
the in-memory, SQLite and PostgreSQL stores.
"""

from __future__ import annotations

import io
import json
import math
import struct
import wave
from pathlib import Path

import pytest
from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont
from pydantic_ai import BinaryContent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memory_core.pipeline import preprocessing
from memory_core.pipeline.profiles import LayerProfile
from memory_core.pipeline.transcript import transcript_cues
from tests.pipeline.conftest import ServiceFactory
from tests.pipeline.layer_kit import ALICE

PAGES = [
    "The quarterly budget review is scheduled for the third week of March.",
    "Our team must migrate the billing service to PostgreSQL before the summer release.",
]


def _pdf(path: Path, pages: list[str]) -> Path:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 10, text)
    pdf.output(str(path))
    return path


def _png(text: str) -> bytes:
    image = Image.new("RGB", (900, 120), "white")
    ImageDraw.Draw(image).text((20, 35), text, fill="black", font=ImageFont.load_default(size=36))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _items(service: object, ids: list[str]) -> list[object]:
    return service.store.items_by_id(ids)  # type: ignore[attr-defined,no-any-return]


def test_pdf_text_is_extracted_per_page_and_evidence_names_the_page(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    service = make_service()
    result = service.memorize(ALICE, uri=str(_pdf(tmp_path / "plan.pdf", PAGES)))
    assert result.missing_capabilities == []
    rows = _items(service, result.items_added)
    pages = {row.text: row.evidence[0]["page"] for row in rows}  # type: ignore[attr-defined]
    budget = next(t for t in pages if "budget review" in t)
    billing = next(t for t in pages if "billing service" in t)
    assert (pages[budget], pages[billing]) == (1, 2)
    run = service.runs(1)[0]
    steps = {s["step_id"]: s for s in run["steps"]}
    assert "preprocess_multimodal" in steps


def test_a_png_with_text_is_read_by_local_ocr(make_service: ServiceFactory, tmp_path: Path) -> None:
    image = tmp_path / "whiteboard.png"
    image.write_bytes(_png("Invoice 4471 must be paid by Friday"))
    service = make_service()
    result = service.memorize(ALICE, uri=str(image))
    assert result.missing_capabilities == []
    texts = [row.text for row in _items(service, result.items_added)]  # type: ignore[attr-defined]
    assert any("4471" in t and "Friday" in t for t in texts), texts


def test_a_scanned_pdf_page_is_read_by_ocr_with_its_page_number(tmp_path: Path) -> None:
    pdf = FPDF()
    pdf.add_page()  # an image-only page: no text layer
    pdf.image(io.BytesIO(_png("The vendor contract renews in October")), x=10, y=10, w=180)
    path = tmp_path / "scan.pdf"
    pdf.output(str(path))
    offline = LayerProfile(name="default", model="offline")
    out = preprocessing.preprocess_file(path.read_bytes, "application/pdf", offline)
    assert out is not None
    assert out.missing == []
    assert "contract renews" in out.text
    assert out.segments[0]["page"] == 1 and out.segments[0]["source"] == "ocr"
    assert out.artifacts["pdf_text"]["pages_without_text_layer"] == [1]


def test_an_image_is_captioned_only_through_a_configured_vision_profile(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    seen: list[str] = []

    def vision(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = messages[0].parts[-1]
        assert isinstance(part, UserPromptPart)
        media = [c for c in part.content if isinstance(c, BinaryContent)]
        seen.extend(m.media_type for m in media)
        return ModelResponse(parts=[TextPart("A whiteboard listing the team's sprint goals.")])

    image = tmp_path / "board.png"
    image.write_bytes(_png("Sprint goals"))
    service = make_service(
        llm_providers={"default": {"model": "offline"}, "vision": {"model": FunctionModel(vision)}},
        role_profiles={"preprocess": "vision"},
    )
    result = service.memorize(ALICE, uri=str(image))
    assert seen == ["image/png"]
    texts = [row.text for row in _items(service, result.items_added)]  # type: ignore[attr-defined]
    assert any("sprint goals" in t for t in texts), texts
    run = service.runs(1)[0]
    assert run["llm_usage"]["preprocess_multimodal"][0]["profile"] == "vision"


def test_audio_needs_a_configured_provider_and_is_still_stored(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    audio = tmp_path / "standup.wav"
    audio.write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt ")
    service = make_service()
    result = service.memorize(ALICE, uri=str(audio))
    assert [m["capability"] for m in result.missing_capabilities] == ["transcription"]
    assert "role_profiles" in result.missing_capabilities[0]["hint"]
    assert service.memorize(ALICE, uri=str(audio)).duplicate

    def transcriber(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("We decided to ship the mobile release on Tuesday.")])

    heard = make_service(
        llm_providers={
            "default": {"model": "offline"},
            "ear": {"model": FunctionModel(transcriber)},
        },
        role_profiles={"preprocess": "ear"},
    )
    other = tmp_path / "retro.wav"
    other.write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt retro")
    result = heard.memorize(ALICE, uri=str(other))
    assert result.missing_capabilities == []
    texts = [row.text for row in _items(heard, result.items_added)]  # type: ignore[attr-defined]
    assert any("mobile release" in t for t in texts), texts


def test_a_failing_provider_is_reported_not_silently_skipped(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError("this model takes no audio")

    service = make_service(
        llm_providers={"default": {"model": "offline"}, "ear": {"model": FunctionModel(broken)}},
        role_profiles={"preprocess": "ear"},
    )
    audio = tmp_path / "call.mp3"
    audio.write_bytes(b"ID3\x03\x00fake")
    result = service.memorize(ALICE, uri=str(audio))
    [missing] = result.missing_capabilities
    assert missing["capability"] == "transcription"
    assert "'ear'" in missing["hint"] and "takes no audio" in missing["hint"]
    assert result.resource_id is not None


@pytest.mark.parametrize(
    ("name", "data", "capability", "reason"),
    [
        ("broken.pdf", b"%PDF-1.4\n% not text\n", "pdf_text", "could not be read"),
        ("broken.png", b"\x89PNG\r\n\x1a\n", "ocr", "not a decodable image"),
    ],
)
def test_an_unreadable_file_names_the_reason(
    make_service: ServiceFactory,
    tmp_path: Path,
    name: str,
    data: bytes,
    capability: str,
    reason: str,
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    result = make_service().memorize(ALICE, uri=str(path))
    [missing] = result.missing_capabilities
    assert missing["capability"] == capability
    assert reason in missing["hint"]


def _wav(path: Path, seconds: float = 6.0) -> Path:
    """A real, short PCM WAV (a 440 Hz tone) written with the stdlib."""
    rate = 8000
    frames = bytearray()
    for n in range(int(rate * seconds)):
        sample = int(8000 * math.sin(2 * math.pi * 440 * n / rate))
        frames += struct.pack("<h", sample)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(bytes(frames))
    return path


TIMED_TRANSCRIPT = (
    "[00:00:01] We decided to ship the mobile release on Tuesday.\n"
    "[00:00:04] The quarterly budget review moves to the third week of March."
)


def _timed_transcriber(heard: list[tuple[str, str]]) -> FunctionModel:
    def transcriber(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = messages[0].parts[-1]
        assert isinstance(part, UserPromptPart)
        prompt = next(c for c in part.content if isinstance(c, str))
        media = next(c for c in part.content if isinstance(c, BinaryContent))
        with wave.open(io.BytesIO(media.data)) as recording:  # the real file reached the model
            heard.append((prompt, f"{recording.getnframes() / recording.getframerate():.1f}s"))
        return ModelResponse(parts=[TextPart(TIMED_TRANSCRIPT)])

    return FunctionModel(transcriber)


def test_a_timed_transcript_gives_items_evidence_with_their_time_and_span(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    heard: list[tuple[str, str]] = []
    service = make_service(
        llm_providers={
            "default": {"model": "offline"},
            "ear": {"model": _timed_transcriber(heard)},
        },
        role_profiles={"preprocess": "ear"},
    )
    result = service.memorize(ALICE, uri=str(_wav(tmp_path / "standup.wav")))
    [(prompt, duration)] = heard
    assert "[hh:mm:ss]" in prompt and duration == "6.0s"
    assert result.missing_capabilities == []
    rows = _items(service, result.items_added)
    evidence = {row.text: row.evidence[0] for row in rows}  # type: ignore[attr-defined]
    mobile = next(e for t, e in evidence.items() if "mobile release" in t)
    budget = next(e for t, e in evidence.items() if "budget review" in t)
    assert (mobile["timestamp"], mobile["start_s"], mobile["end_s"]) == ("00:00:01", 1.0, 4.0)
    assert (budget["timestamp"], budget["start_s"]) == ("00:00:04", 4.0)
    assert "end_s" not in budget  # the last line's end is not known
    start, end = mobile["span"]
    assert TIMED_TRANSCRIPT[start:end] == "We decided to ship the mobile release on Tuesday."
    run = service.runs(1)[0]
    assert run["steps"][1]["step_id"] == "preprocess_multimodal"


def test_a_configured_extractor_quoting_a_timed_line_gets_its_time(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    def extractor(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        quote = "The quarterly budget review moves to the third week of March."
        found = {"items": [{"text": "Budget review is in the third week of March.",
                            "quote": quote, "confidence": 0.8, "stability": "evolving"}]}  # fmt: skip
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps(found))])

    service = make_service(
        llm_providers={
            "default": {"model": "offline"},
            "ear": {"model": _timed_transcriber([])},
            "reader": {"model": FunctionModel(extractor)},
        },
        role_profiles={"preprocess": "ear", "extract": "reader"},
    )
    result = service.memorize(ALICE, uri=str(_wav(tmp_path / "review.wav", seconds=1.0)))
    [row] = _items(service, result.items_added)
    [evidence] = row.evidence  # type: ignore[attr-defined]
    assert (evidence["timestamp"], evidence["start_s"]) == ("00:00:04", 4.0)
    start, end = evidence["span"]
    assert TIMED_TRANSCRIPT[start:end] == evidence["quote"]


def test_words_before_the_first_time_are_an_untimed_segment() -> None:
    out = preprocessing.Preprocessed()
    timed = out.add_transcript("Notes from the call.\n[00:00:01] We ship on Tuesday.")
    assert timed == 1
    assert [(out.text[s["start"] : s["end"]], s.get("start_s")) for s in out.segments] == [
        ("Notes from the call.", None),
        ("We ship on Tuesday.", 1.0),
    ]


@pytest.mark.parametrize(
    ("transcript", "expected"),
    [
        (
            "1\n00:00:01,000 --> 00:00:03,500\nHello team.\n\n2\n00:00:04,000 --> 00:00:06,000\n"
            "We ship Tuesday.\n",
            [("Hello team.", 1.0, 3.5), ("We ship Tuesday.", 4.0, 6.0)],
        ),
        (
            "[1:05 - 1:09] Budget moves.\n(01:10) Done.",
            [("Budget moves.", 65.0, 69.0), ("Done.", 70.0, None)],
        ),
        ("01:02:03.5 Long meeting.", [("Long meeting.", 3723.5, None)]),
        ("10:30 we met in the hall.", []),  # an unbracketed stamp without hours is speech
    ],
)
def test_transcript_cues_read_the_usual_time_formats(
    transcript: str, expected: list[tuple[str, float, float | None]]
) -> None:
    cues = transcript_cues(transcript)
    assert [(transcript[c.start : c.end], c.start_s, c.end_s) for c in cues] == expected
