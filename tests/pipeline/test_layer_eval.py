"""The layer's evaluation corpus (bench/layer_eval) is well-formed, and its runner runs.

Fast and offline: the committed Bitext sample only, the hashing embedder, a 6-conversation slice.
"""

from __future__ import annotations

import csv
import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "bench" / "layer_eval" / "data"


def _runner() -> ModuleType:
    path = ROOT / "bench" / "layer_eval" / "run_eval.py"
    spec = importlib.util.spec_from_file_location("layer_eval_run_eval", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ev = _runner()


def _rows() -> list[dict[str, str]]:
    with (DATA / "bitext_sample.csv").open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_sample_is_stratified_over_the_27_intents() -> None:
    rows = _rows()
    assert len(rows) == 324
    per_intent = Counter((r["intent"], r["split"]) for r in rows)
    intents = {intent for intent, _ in per_intent}
    assert len(intents) == 27
    for intent in intents:
        assert per_intent[(intent, "memorize")] == 8, intent
        assert per_intent[(intent, "query")] == 4, intent
    assert len({r["instruction"] for r in rows}) == len(rows), "a request appears twice"


def test_each_intent_sits_in_its_readme_category() -> None:
    owner = {i: cat for cat, intents in ev.TAXONOMY_INTENTS.items() for i in intents}
    assert len(owner) == 27
    for row in _rows():
        assert owner[row["intent"]] == row["category"], row["instruction"]


def test_entity_offsets_point_at_the_labelled_value() -> None:
    labelled = [r for r in _rows() if r["entity_type"]]
    assert len(labelled) > 50
    for row in labelled:
        start, end = int(row["start_offset"]), int(row["end_offset"])
        # a few labels end past the request (the id in the text was shortened): cut there
        assert 0 <= start < min(end, len(row["instruction"])), row["instruction"]
        cut, value = row["instruction"][start:end].lower(), row["entity_value"].lower()
        assert value in cut or cut in value, (cut, value)
    corpus = ev.load_corpus()
    assert sum(1 for c in corpus if c.entity) == len(labelled)


def test_sources_name_the_repository_commit_and_license() -> None:
    sources = (DATA / "SOURCES.md").read_text(encoding="utf-8")
    assert "bitext/customer-support-llm-chatbot-training-dataset" in sources
    assert "8b6ca3d9559a4a9abab94f7978fae67019215a82" in sources
    assert "Community Data License Agreement" in sources
    license_text = (DATA / "LICENSE-CDLA-Sharing-1.0.txt").read_text(encoding="utf-8")
    assert license_text.startswith("Community Data License Agreement – Sharing – Version 1.0")


def test_the_runner_measures_a_tiny_slice_end_to_end() -> None:
    out = ev.run(embedder="hash:256", limit=6)
    assert out["conversations"] == 6 and out["queries"] == 3
    assert out["items"] > 0
    assert set(out["categorisation"]) >= {
        "layer (offline categorise)",
        "keyword overlap (baseline)",
    }
    for section in ("extraction", "categorisation", "retrieval"):
        for figures in out[section].values():
            for name, value in figures.items():
                if name != "entity_conversations":
                    assert 0.0 <= value <= 1.0 or name == "items_per_conversation", (name, value)
    assert sum(out["retrieve_layers"].values()) == 3
    # every sentence is an item in the baseline, so it keeps every request
    assert out["extraction"]["every sentence (baseline)"]["request_kept"] == 1.0
