"""A run's payload never stores a secret, whichever string of it holds one; and the keyword
shortcut of the redactor (``absent_in_ascii``) never skips a text its full scan would match.

Real SQLite files: the run is written through the store's log port, then the table and every
byte of the database, its WAL and shared-memory file are read back.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memory_core import redaction
from memory_core.config import load_settings
from memory_core.redaction import redact_text
from memory_core.scope import Scope
from memory_core.service import Memoir
from rules_parser import secrets
from rules_parser.secrets import absent_in_ascii, find_secrets

pytestmark = pytest.mark.anyio

# (text as a caller could send it, the part that must never be stored)
SECRETS = [
    (
        "push with ghp_LOOxl3gV3FGRmrCNnFZsGqgh0frrhbkVAhRH",
        "ghp_LOOxl3gV3FGRmrCNnFZsGqgh0frrhbkVAhRH",
    ),
    ('db_PassWord = "0MZwlwp23JOwv0!2"', "0MZwlwp23JOwv0!2"),
    ("API_KEY=HBhact35rktmZYmhG2", "HBhact35rktmZYmhG2"),
    (
        "Authorization: BEARER MxEnWRwvFI1tdlNODi520rE5tIdjdHbRtFxOsxQ9",
        "MxEnWRwvFI1tdlNODi520rE5tIdjdHbRtFxOsxQ9",
    ),
    ("postgres://deploy:Wq9x4Lo53t2zLELp2@db.internal/app", "Wq9x4Lo53t2zLELp2"),
    # Non-ASCII case partners of ASCII letters: re.IGNORECASE pairs 'ſ' with 's' and the
    # Kelvin sign with 'k', which str.lower does not map.
    ('\u017fecret = "0MZwlwp23JOwv0!2"', "0MZwlwp23JOwv0!2"),
    ("api_\u212aey=HBhact35rktmZYmhG2", "HBhact35rktmZYmhG2"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _payload_with(secret: str, path: tuple[Any, ...]) -> dict[str, Any]:
    """A query-run-shaped payload with ``secret`` at ``path`` (every other string benign)."""
    payload: dict[str, Any] = {
        "task": "speed up the config files",
        "detected_layer": "4-Persistence",
        "layer_candidates": [{"layer": "4-Persistence", "confidence": 1.0}],
        "topics": ["error-handling"],
        "technologies": ["python"],
        "mode": "review",
        "top_scores": [{"directive_id": "cee1c0be84e3a065056e1e1d", "score": 31.2}],
        "selected_ids": ["cee1c0be84e3a065056e1e1d"],
        "warnings": ["unknown mode 'x'"],
        "tokens_used": 867,
        "nested": {"deeper": [{"text": "plain"}]},
    }
    node: Any = payload
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = secret
    return payload


STRING_PATHS = [
    ("task",),
    ("detected_layer",),
    ("layer_candidates", 0, "layer"),
    ("topics", 0),
    ("technologies", 0),
    ("mode",),
    ("top_scores", 0, "directive_id"),
    ("selected_ids", 0),
    ("warnings", 0),
    ("nested", "deeper", 0, "text"),
]


def _raw(db: Path) -> bytes:
    return b"".join(
        p.read_bytes()
        for p in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"))
        if p.exists()
    )


@pytest.mark.parametrize("mode", ["redacted", "none"])
async def test_a_secret_in_any_string_of_a_run_payload_never_reaches_the_file(
    tmp_path: Path, mode: str
) -> None:
    db = tmp_path / "memoir.db"
    settings = load_settings(
        {"embedding": {"model": "hash:384"}, "storage": {"run_log_text": mode}},
        cwd=tmp_path,
        environ={},
    )
    memoir = await Memoir.open(f"sqlite:///{db}", settings=settings)
    written = 0
    try:
        store = memoir.context.store
        for text, _ in SECRETS:
            for path in STRING_PATHS:
                payload = _payload_with(text, path)
                await store.write(
                    lambda tx, p=payload: tx.log.record_run(
                        Scope.of("s"), "rules_query", took_ms=1.0, payload=p
                    )
                )
                written += 1
    finally:
        await memoir.close()
    with sqlite3.connect(db) as conn:
        stored = [str(r[0]) for r in conn.execute("SELECT payload FROM run")]
    assert len(stored) >= written
    raw = _raw(db)
    for _, needle in SECRETS:
        assert not [p for p in stored if needle in p], needle
        assert needle.encode() not in raw, needle


@pytest.mark.parametrize(("text", "needle"), SECRETS)
def test_the_redactor_finds_keywords_in_any_case(text: str, needle: str) -> None:
    assert needle not in redact_text(text)
    assert needle not in redact_text(f'{{"task": "{text}", "tokens_used": 3}}')


def _fuzz_texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    words = [
        "password",
        "PassWd",
        "pwd",
        "SECRET",
        "api_key",
        "Api-Key",
        "apikey",
        "access_token",
        "auth-token",
        "client_secret",
        "private_key",
        "Bearer",
        "basic",
        "TOKEN",
        "tokens_used",
        "\u017fecret",
        "api_\u212aey",
        "pa\u017f\u017fword",
        "word",
        "\u00e9t\u00e9",
        '{"a": ',
    ]
    joins = ["=", ": ", ' = "', "='", '\\"', " ", ":=", "=>", "\n", "\t", ""]
    values = ["aB3$kL9mQ2xZ7pR4", "hunter22", "x9Y8z7W6v5U4t3S2r1Q0p9O8n7M6l5K4", "s3cr3t-V4lue!x"]
    return [
        "".join(
            rng.choice(words) + rng.choice(joins) + rng.choice(values) + rng.choice(['"', "'", " "])
            for _ in range(rng.randint(1, 5))
        )
        for _ in range(count)
    ]


@pytest.mark.parametrize(
    ("full", "keywords"),
    [
        (redaction._ASSIGNMENT, redaction._ASSIGNMENT_LOWER),
        (redaction._BEARER, redaction._BEARER_LOWER),
        (secrets._ASSIGN_RE, secrets._ASSIGN_NAME_LOWER),
    ],
    ids=["assignment", "bearer", "rules_parser-assignment"],
)
def test_the_keyword_shortcut_never_skips_a_text_the_full_pattern_matches(
    full: Any, keywords: Any
) -> None:
    texts = _fuzz_texts(7, 4000)
    matched = [t for t in texts if full.search(t)]
    assert len(matched) > 100  # the corpus exercises the pattern
    assert not [t for t in matched if absent_in_ascii(t, keywords)]
    # and it does skip: texts without a keyword are not scanned
    assert absent_in_ascii('{"tokens_used": 867, "selected_ids": ["cee1c0be84e3"]}', keywords)


def test_find_secrets_still_reports_a_mixed_case_assignment() -> None:
    findings = find_secrets('DB_PASSWORD: "0MZwlwp23JOwv0!2" and \u017fecret = "0MZwlwp23JOwv0!3"')
    assert [f.kind for f in findings] == ["credential_assignment", "credential_assignment"]
