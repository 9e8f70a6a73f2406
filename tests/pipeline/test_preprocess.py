"""Multimodal preprocessing in memorize (seed 004 §8.1): a real PDF (pypdf, page numbers in the
evidence), a real PNG through the local OCR engine (RapidOCR, models inside its wheel), a
scanned PDF page read by OCR, captions and transcripts only through a configured profile
(pydantic-ai FunctionModel receiving the media), and missing capabilities reported with the
resource still stored. On the in-memory and SQLite stores.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont
from pydantic_ai import BinaryContent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memory_core.pipeline import preprocessing
from memory_core.pipeline.profiles import LayerProfile
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
