"""A PDF and an image go through the preprocess step on every runner with the same result, on
each of the three stores (in-memory, a SQLite file, PostgreSQL): the step's state (page
segments, artifacts, missing capabilities) crosses Burr's persisted state and Temporal's JSON
payloads intact, and the stored items keep their page evidence."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont

from memory_core.pipeline.contract import Runner, SyncRunner
from tests.pipeline.layer_kit import ALICE
from tests.pipeline_runners.conftest import BACKENDS, StoreFactory, opened_service, runner_named

PAGES = [
    "The quarterly budget review is scheduled for the third week of March.",
    "Our team must migrate the billing service to PostgreSQL before the summer release.",
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("files")
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in PAGES:
        pdf.add_page()
        pdf.multi_cell(0, 10, text)
    pdf.output(str(folder / "plan.pdf"))
    image = Image.new("RGB", (900, 120), "white")
    font = ImageFont.load_default(size=36)
    ImageDraw.Draw(image).text(
        (20, 35), "Invoice 4471 must be paid by Friday", fill="black", font=font
    )
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    (folder / "board.png").write_bytes(buffer.getvalue())
    (folder / "call.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt ")
    return {"pdf": folder / "plan.pdf", "png": folder / "board.png", "wav": folder / "call.wav"}


def _session(runner: Runner, files: dict[str, Path], metadata_store: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with opened_service(
        runner,
        metadata_store,
        allowed_roots=sorted({str(p.parent) for p in files.values()}),
    ) as service:
        for kind, path in files.items():
            result = service.memorize(ALICE, uri=str(path))
            rows = service.store.items_by_id(result.items_added)
            out[kind] = {
                "items": sorted((r.text, r.evidence[0].get("page")) for r in rows),
                "missing": [m["capability"] for m in result.missing_capabilities],
            }
    return out


@pytest.fixture(scope="module")
def on_sync(files: dict[str, Path]) -> dict[str, Any]:
    return _session(SyncRunner(), files)


def test_the_sync_session_read_every_file(on_sync: dict[str, Any]) -> None:
    assert {page for _, page in on_sync["pdf"]["items"]} == {1, 2}
    assert any("4471" in text for text, _ in on_sync["png"]["items"])
    assert on_sync["wav"] == {"items": [], "missing": ["transcription"]}


_SYNC_ON: dict[str, dict[str, Any]] = {}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["burr", "temporal", "temporal_local"])
def test_preprocessing_gives_the_same_items_on_every_runner(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    files: dict[str, Path],
    on_sync: dict[str, Any],
    fresh_store: StoreFactory,
    name: str,
    backend: str,
) -> None:
    if backend not in _SYNC_ON:  # the sync baseline on this backend, once
        _SYNC_ON[backend] = _session(SyncRunner(), files, fresh_store(backend))
    assert _SYNC_ON[backend] == on_sync  # the store does not change what preprocessing reads
    runner = runner_named(request, tmp_path, name)
    assert _session(runner, files, fresh_store(backend)) == on_sync
