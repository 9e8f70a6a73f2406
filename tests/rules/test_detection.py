"""Context detection (Requirements 2 and 6): layers, topics, technologies, confidence."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.config import RulesSettings
from memory_core.errors import InvalidInputError
from memory_core.rules.detection import DetectionCache, detect_context, validate_task
from memory_core.rules.dictionaries import build_dictionaries
from memory_core.rules.service import RulesService

TABLES = build_dictionaries(RulesSettings())


@pytest.mark.parametrize(
    ("task", "layer"),
    [
        ("Build a React component for the signup form", "1-Presentation"),
        ("Move the refund workflow into the billing service", "2-Application"),
        ("Add an aggregate and a value object to the domain model", "3-Domain"),
        ("Write a SQL migration for the repository tables", "4-Persistence"),
        ("Add unit tests and an integration test to raise coverage", "5-Tests"),
        ("Update the documentation diagrams and the specification", "6-Docs"),
        ("Ship the Docker image to Azure through the CI/CD pipeline", "7-Deployment"),
    ],
)
def test_each_layer_is_detected_from_its_keywords(task: str, layer: str) -> None:
    assert detect_context(task, TABLES).detected_layer == layer


def test_ambiguous_tasks_return_several_layers_with_confidence() -> None:
    detected = detect_context("Add a database query behind the React page", TABLES)
    layers = {c.layer: c.confidence for c in detected.layer_candidates}
    assert {"1-Presentation", "4-Persistence"} <= layers.keys()
    assert all(0 <= c <= 1 for c in layers.values())
    assert abs(sum(layers.values()) - 1) < 0.01
    assert any("ambiguous layer" in w for w in detected.warnings)


@pytest.mark.parametrize(
    ("task", "topic"),
    [
        ("Encrypt the secrets and check authorization", "security"),
        ("Add mocking to the integration test", "testing"),
        ("Add caching and indexing for scaling", "performance"),
        ("Version the GraphQL endpoint contract", "api"),
    ],
)
def test_topics_come_from_the_domain_dictionaries(task: str, topic: str) -> None:
    assert topic in detect_context(task, TABLES).topics


def test_languages_frameworks_and_platforms_are_detected() -> None:
    detected = detect_context(
        "Port the C# and TypeScript code to Python and JavaScript using React, .NET, Express "
        "and FastAPI on Azure, AWS, Docker and Kubernetes",
        TABLES,
    )
    assert {"csharp", "typescript", "python", "javascript"} <= set(detected.languages)
    assert {"react", "dotnet", "express", "fastapi"} <= set(detected.frameworks)
    assert {"azure", "aws", "docker", "kubernetes"} <= set(detected.platforms)


def test_postgres_sqlalchemy_and_redis_are_detected_as_technologies() -> None:
    detected = detect_context(
        "Add a REST endpoint that stores orders in Postgres via SQLAlchemy and caches them in "
        "Redis",
        TABLES,
    )
    assert "sqlalchemy" in detected.frameworks
    assert {"postgresql", "redis"} <= set(detected.platforms)


def test_typos_and_inflections_are_tolerated() -> None:
    detected = detect_context("Fix the authentification for the databse migrations", TABLES)
    assert "security" in detected.topics
    assert detected.detected_layer == "4-Persistence"
    assert "deployment" in detect_context("deploying the containers", TABLES).topics


def test_confidence_warnings_below_06_and_03() -> None:
    strong = detect_context("Add a FastAPI endpoint with JWT authentication in Python", TABLES)
    weak = detect_context("Write unit tests for the pricing service", TABLES)
    none = detect_context("make it nicer", TABLES)
    assert strong.confidence >= 0.6 and not any("confidence" in w for w in strong.warnings)
    assert 0.3 <= weak.confidence < 0.6
    assert any(w.startswith("low confidence") for w in weak.warnings)
    assert none.confidence < 0.3
    assert any(w.startswith("VERY LOW CONFIDENCE") for w in none.warnings)


def test_keywords_only_when_asked() -> None:
    assert detect_context("Add a login endpoint", TABLES).keywords is None
    keywords = detect_context(
        "Please add a login endpoint to the API", TABLES, return_keywords=True
    )
    assert keywords.keywords is not None
    assert keywords.keywords[0] == "add"  # action words first
    assert {"login", "endpoint", "api"} <= set(keywords.keywords)
    assert "the" not in keywords.keywords


def test_dictionaries_extend_from_settings() -> None:
    tables = build_dictionaries(
        RulesSettings(
            extra_topics={"payments": ["stripe", "invoice"]},
            extra_technologies={"svelte": ["sveltekit"]},
            extra_layer_keywords={"3-Domain": ["ledger"]},
        )
    )
    detected = detect_context(
        "Charge the invoice through Stripe in SvelteKit, post to ledger", tables
    )
    assert "payments" in detected.topics
    assert "svelte" in detected.frameworks
    assert detected.detected_layer == "3-Domain"


def test_dictionaries_learn_topics_from_the_graph() -> None:
    tables = build_dictionaries(RulesSettings(), learned_topics=["feature-flags"])
    assert "feature-flags" in detect_context("Guard the checkout with feature flags", tables).topics
    assert (
        "feature-flags"
        not in detect_context("Guard the checkout with feature flags", TABLES).topics
    )


@pytest.mark.parametrize("task", ["", "   ", "\n\t", None])
def test_empty_input_is_rejected(task: str | None) -> None:
    with pytest.raises(InvalidInputError):
        validate_task(task, max_chars=100)


def test_overlong_input_is_rejected() -> None:
    with pytest.raises(InvalidInputError, match="over the 10 limit"):
        validate_task("x" * 11, max_chars=10)


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=300))
def test_detection_never_crashes_and_confidence_is_in_range(text: str) -> None:
    detected = detect_context(text, TABLES, return_keywords=True)
    assert 0.0 <= detected.confidence <= 1.0
    if detected.confidence < 0.6:
        assert detected.warnings


def test_cache_expires_after_its_ttl() -> None:
    cache = DetectionCache(ttl_s=300)
    value = detect_context("Add a login endpoint", TABLES)
    cache.put(("s", 1, "t"), value, now=1000.0)
    assert cache.get(("s", 1, "t"), now=1299.0) is value
    assert cache.get(("s", 1, "t"), now=1301.0) is None
    assert (cache.hits, cache.misses) == (1, 1)


@pytest.mark.anyio
async def test_service_caches_detection_and_learns_from_ingested_rules(
    loaded: RulesService,
) -> None:
    first = await loaded.detect_context("Backfill data for the migrations", scope="s")
    second = await loaded.detect_context("Backfill data for the migrations", scope="s")
    assert first is second
    assert loaded.detection_cache.hits >= 1
    assert "migrations" in first.topics  # a topic the ingested rules declare
    with pytest.raises(InvalidInputError):
        await loaded.detect_context("  ", scope="s")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=30), min_size=1, max_size=8))
def test_topic_normalisation_is_idempotent_and_never_crashes(names: list[str]) -> None:
    from memory_core.rules.topics import TopicNormalizer

    normalizer = TopicNormalizer()
    first = normalizer.normalize_all(names)
    assert normalizer.normalize_all(first) == first
    assert all(topic and topic == topic.strip() for topic in first)


def test_topic_spellings_meet() -> None:
    from memory_core.rules.topics import TopicNormalizer

    normalizer = TopicNormalizer(["migrations"])
    assert {normalizer.normalize(n) for n in ("auth", "Authentication", "authn", "AUTH")} == {
        "authentication"
    }
    assert normalizer.normalize("Migration") == "migrations"
    assert normalizer.normalize("authenticaton") == "authentication"  # typo
