"""The 100k runner bench's PostgreSQL store is a copy of a memorize-filled SQLite layer
(``bench/layer_copy.py``): the copy must hold what a PostgreSQL store filled through
``memorize`` holds and answer every retrieve the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.layer_copy import compare, fill_and_copy
from tests.pipeline.conftest import fresh_pg_schema

pytestmark = pytest.mark.postgres


def test_a_copied_layer_answers_like_one_filled_through_memorize(
    pg_admin_url: str, tmp_path: Path
) -> None:
    filled, copied = fresh_pg_schema(pg_admin_url), fresh_pg_schema(pg_admin_url)
    fill_and_copy(600, tmp_path / "layer.db", filled, copied)

    found = compare(filled, copied, queries=10)

    assert found["items_filled"] >= 600
    assert found["items_copied"] == found["items_identical"] == found["items_filled"]
    assert found["categories_identical"] is True
    assert found["answers_identical"] == 10
