"""The ``/memory`` page in a real browser: the distribution's Chromium (``apt-get install
chromium chromium-driver``) driven by selenium through its chromedriver, against a real
``memoir serve --transport http`` process.

The test adds entries, searches, opens an entry's score breakdown and supersession chain,
pins, forgets (cancelling once, then confirming), toggles incognito and memory, and checks the
DOM after each step; then it takes screenshots of the page and of each chart and checks the
pixels (not blank, the expected size, the series' colours drawn in the plot areas).

Skipped, saying so, only when Chromium or chromedriver is not installed (``make browser``
installs them; CI's ``.ci/run`` does; ``MEMOIR_REQUIRE_BROWSER=1`` makes their absence a failure).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np
import pytest
from mcp_testkit import RunningServer, start_http_server, stop_http_server
from png_kit import read_png
from trust_kit import git_project

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

pytestmark = pytest.mark.slow
_MISSING = (
    "Chromium / chromedriver not installed: `make browser` "
    "(apt-get install -y chromium chromium-driver) to run the browser test"
)


@pytest.fixture(scope="module", autouse=True)
def chromium_installed() -> None:
    """Skip without Chromium, saying why (``.ci/run`` installs it first and warns when it
    cannot); ``MEMOIR_REQUIRE_BROWSER=1`` turns the skip into a failure."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        if os.environ.get("MEMOIR_REQUIRE_BROWSER") == "1":
            pytest.fail(_MISSING)
        pytest.skip(_MISSING)


SPACE = "web-test"
_WAIT_S = 30
WIDTH, HEIGHT = 1280, 1000


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningServer, str]]:
    """The server over a SQLite file, then over PostgreSQL + pgvector; and its database URL."""
    root = tmp_path_factory.mktemp("web")
    project = git_project(root / "app")
    db_url = f"sqlite:///{root / 'memoir.db'}"
    if request.param == "postgres":
        from store_testkit import fresh_pg_database, start_pgserver  # tests/storage

        db_url = fresh_pg_database(start_pgserver())
    running = start_http_server(root, "http", workspaces=(project,), db_url=db_url)
    try:
        yield running, db_url
    finally:
        assert stop_http_server(running) == 0, "".join(running.stderr)


async def _queue_for_embedding(db_url: str, texts: list[str]) -> None:
    """Entries saved with their embedding left to the backfill (the server embeds on write),
    through the Python surface on the server's own database: the backlog the dashboard plots."""
    from memory_core.config import load_settings
    from memory_core.embed import create_embedder
    from memory_core.service import Memoir

    memoir = await Memoir.open(
        db_url,
        settings=load_settings({}, cwd=Path("/"), environ={}),
        embedder=create_embedder("hash:384"),
    )
    try:
        for text in texts:
            await memoir.memories.remember(text, space=SPACE, embed_now=False)
    finally:
        await memoir.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tmp_path_factory.mktemp("chromium-profile")
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={WIDTH},{HEIGHT}",
        "--force-device-scale-factor=1",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(_WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


class Page:
    """The page's controls by id, and a wait for its calls to finish."""

    def __init__(self, driver: Any) -> None:
        self.d = driver

    def wait(self, condition: Callable[[Any], Any] | None = None) -> None:
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(self.d, _WAIT_S).until(
            lambda d: (
                d.execute_script("return !document.body.dataset.busy")
                and (condition is None or condition(d))
            )
        )

    def by_id(self, name: str) -> Any:
        return self.d.find_element("id", name)

    def css(self, selector: str) -> list[Any]:
        return list(self.d.find_elements("css selector", selector))

    def click(self, element_or_id: Any) -> None:
        element = self.by_id(element_or_id) if isinstance(element_or_id, str) else element_or_id
        element.click()
        self.wait()

    def type(self, name: str, text: str) -> None:
        field = self.by_id(name)
        field.clear()
        field.send_keys(text)

    def status(self) -> str:
        return str(self.by_id("status").text)

    def entries(self) -> list[Any]:
        return self.css("#entries li.entry[data-id]")

    def entry(self, text: str) -> Any:
        found = [e for e in self.entries() if e.find_element("css selector", ".text").text == text]
        assert len(found) == 1, [e.text for e in self.entries()]
        return found[0]

    def texts(self) -> list[str]:
        return [e.find_element("css selector", ".text").text for e in self.entries()]

    def add(self, text: str, tags: str = "") -> None:
        self.type("new-text", text)
        self.type("new-tags", tags)
        self.click("add-btn")


def colour_pixels(image: np.ndarray, hex_colour: str, tolerance: int = 12) -> int:
    rgb = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)])
    diff = np.abs(image[:, :, :3].astype(int) - rgb).max(axis=2)
    return int((diff <= tolerance).sum())


def test_the_memory_page_end_to_end(
    served: tuple[RunningServer, str], browser: Any, tmp_path: Path
) -> None:
    server, db_url = served
    page = Page(browser)
    browser.get(f"{server.base}/memory?space={SPACE}")
    page.wait(lambda d: "loaded" in d.find_element("id", "status").text)
    assert page.by_id("space").get_attribute("value") == SPACE
    assert page.css("#entries #empty"), "an empty space says so"

    # Add entries; a later meeting time supersedes the earlier one; a repeat merges.
    page.add("User prefers pnpm over npm", "tooling")
    assert page.status().startswith("created"), page.status()
    assert page.texts() == ["User prefers pnpm over npm"]
    page.add("The team meeting is on Mondays at 10am", "meetings")
    page.add("The team meeting is on Wednesdays at 3pm", "meetings")
    assert page.texts() == [
        "The team meeting is on Wednesdays at 3pm",
        "User prefers pnpm over npm",
    ]
    page.add("User prefers pnpm over npm!", "tooling")
    assert page.status().startswith("merged"), page.status()
    assert len(page.entries()) == 2
    page.click("filter-history")
    assert len(page.entries()) == 3
    old = page.entry("The team meeting is on Mondays at 10am")
    assert old.find_elements("css selector", ".badge.superseded")
    page.click("filter-history")

    # Search, with each result's score breakdown.
    page.type("search-q", "package manager")
    page.click("search-btn")
    assert "search results" in page.by_id("mode").text
    top = page.entries()[0]
    assert top.find_element("css selector", ".text").text == "User prefers pnpm over npm"
    relevance = float(top.find_element("css selector", ".score-relevance").text)
    assert relevance > 0
    labels = top.find_element("css selector", ".scores").text
    assert "relevance ×" in labels and "importance ×" in labels and "total" in labels
    page.click("search-clear")
    assert len(page.entries()) == 2

    # The supersession chain of the current meeting entry.
    meeting = page.entry("The team meeting is on Wednesdays at 3pm")
    page.click(meeting.find_element("css selector", ".details-btn"))
    chain = page.entry("The team meeting is on Wednesdays at 3pm").find_elements(
        "css selector", ".details .chain li"
    )
    assert [c.text.split(" — ")[0] for c in chain] == [
        "The team meeting is on Mondays at 10am",
        "The team meeting is on Wednesdays at 3pm",
    ]
    assert "current" in (chain[1].get_attribute("class") or "")

    # Pin and unpin, and the pinned filter.
    pnpm = page.entry("User prefers pnpm over npm")
    page.click(pnpm.find_element("css selector", ".pin-btn"))
    pnpm = page.entry("User prefers pnpm over npm")
    assert pnpm.find_elements("css selector", ".badge.pinned")
    assert pnpm.find_element("css selector", ".pin-btn").text == "Unpin"
    from selenium.webdriver.support.ui import Select

    Select(page.by_id("filter-pinned")).select_by_value("true")
    page.wait()
    assert page.texts() == ["User prefers pnpm over npm"]
    Select(page.by_id("filter-pinned")).select_by_value("")
    page.wait()
    page.click(page.entry("User prefers pnpm over npm").find_element("css selector", ".pin-btn"))
    assert not page.entry("User prefers pnpm over npm").find_elements(
        "css selector", ".badge.pinned"
    )

    # Forget asks first: cancelling keeps the entry, confirming deletes it.
    page.click(page.entry("User prefers pnpm over npm").find_element("css selector", ".forget-btn"))
    dialog = page.by_id("confirm-dialog")
    assert dialog.get_attribute("open") is not None
    assert "User prefers pnpm over npm" in page.by_id("confirm-text").text
    page.click("confirm-no")
    assert dialog.get_attribute("open") is None
    assert "User prefers pnpm over npm" in page.texts()
    page.click(page.entry("User prefers pnpm over npm").find_element("css selector", ".forget-btn"))
    page.click("confirm-yes")
    assert page.status().startswith("forgot"), page.status()
    assert page.texts() == ["The team meeting is on Wednesdays at 3pm"]

    # Incognito: nothing is saved while it is on.
    page.click("incognito-toggle")
    assert page.by_id("incognito-state").text == "incognito on"
    page.add("A secret plan for the launch")
    assert page.status().startswith("skipped"), page.status()
    assert page.texts() == ["The team meeting is on Wednesdays at 3pm"]
    page.click("incognito-toggle")
    assert page.by_id("incognito-state").text == "incognito off"

    # Memory off and on again, as the server sees it.
    page.click("memory-enabled")
    assert not page.by_id("memory-enabled").is_selected()
    settings = httpx.get(f"{server.base}/v1/memory/settings", params={"space": SPACE}).json()
    assert settings["memory_enabled"] is False
    page.click("memory-enabled")
    assert page.by_id("memory-enabled").is_selected()
    settings = httpx.get(f"{server.base}/v1/memory/settings", params={"space": SPACE}).json()
    assert settings["memory_enabled"] is True

    # Three entries waiting for the backfill, then a recall that finds something (the
    # hit-rate plot), then reload the dashboard.
    anyio.run(
        _queue_for_embedding,
        db_url,
        ["Staging runs on Fridays", "The linter is ruff", "Docs deploy from main"],
    )
    page.type("search-q", "team meeting")
    page.click("search-btn")
    page.click("search-clear")
    assert page.by_id("kpi-dedupe").text == "1"
    # two meetings (one superseded; pnpm forgotten) and the three queued entries
    assert page.by_id("kpi-entries").text == "5"
    assert page.by_id("kpi-backlog").text == "3"
    assert page.css("#chart-dedupe rect.bar-merge")
    assert page.css("#chart-actions rect.bar-pin") and page.css("#chart-actions rect.bar-forget")
    assert page.css("#chart-actions rect.bar-incognito") and page.css(
        "#chart-actions rect.bar-settings"
    )
    assert page.css("#chart-hits circle.point")
    assert page.css("#chart-backlog rect.bar-backlog")
    # The backlog over time: one bar, today's (end-of-day counts come from the recorded queue
    # and embed times; earlier days are covered in test_backfill.py), under the alert level.
    assert len(page.css("#chart-backlog rect.bar-backlog-day")) == 1
    caption = page.css("#chart-backlog text.backlog-caption")[0].text
    assert "peak 3, alert at 100" in caption and "embedded" in caption

    # Screenshots: the whole page, then each chart.
    browser.execute_script("window.scrollTo(0, 0)")
    whole = tmp_path / "memory-page.png"
    assert browser.save_screenshot(str(whole))
    image = read_png(whole.read_bytes())
    assert image.shape[:2] == (
        browser.execute_script("return window.innerHeight"),
        browser.execute_script("return window.innerWidth"),
    )
    flat = image[:, :, :3].reshape(-1, 3)
    assert len(np.unique(flat[::7], axis=0)) > 50, "the page screenshot is blank"
    assert colour_pixels(image, "#1d2330") > 10_000, "the header bar is not drawn"

    expected = {
        "chart-dedupe": "#2f6fde",  # dedupe saves
        "chart-actions": "#d69e2e",  # pins
        "chart-hits": "#23885a",  # hit-rate points
        "chart-backlog": "#3c8dbc",  # entries waiting at the end of each day
    }
    for chart, colour in expected.items():
        element = page.by_id(chart)
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
        shot = read_png(element.screenshot_as_png)
        (tmp_path / f"{chart}.png").write_bytes(element.screenshot_as_png)
        size = element.size
        assert abs(shot.shape[1] - size["width"]) <= 2 and abs(shot.shape[0] - size["height"]) <= 2
        background = (shot[:, :, :3] >= 250).all(axis=2)
        assert (~background).sum() > 500, f"{chart}: nothing drawn"
        assert colour_pixels(shot, colour) > 40, f"{chart}: no {colour} series in the plot"


def test_the_page_asks_for_the_token_a_guarded_server_needs(
    browser: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from trust_kit import Token, write_config

    root = tmp_path_factory.mktemp("web-auth")
    project = git_project(root / "app")
    alice = Token.make("alice", project)
    config = write_config(root / "etc", tokens=(alice,))
    guarded = start_http_server(root, "http", workspaces=(project,), config=config)
    try:
        page = Page(browser)
        browser.get(f"{guarded.base}/memory")
        page.wait(lambda d: "token" in d.find_element("id", "status").text)
        assert page.by_id("token-box").is_displayed()
        assert page.status().startswith("this server needs a token"), page.status()
        assert page.entries() == []
        page.type("token", alice.value)
        page.click("load-btn")
        assert page.by_id("space").get_attribute("value") == f"project:{project}"
        assert page.status().startswith("loaded"), page.status()
        page.add("Alpha deploys with blue-green releases")
        assert page.status().startswith("created"), page.status()
        assert page.texts() == ["Alpha deploys with blue-green releases"]
        # Another project's space is refused, and the page says why.
        page.type("space", "project:/elsewhere")
        page.click("load-btn")
        assert "not one this token may use" in page.status(), page.status()
    finally:
        assert stop_http_server(guarded) == 0, "".join(guarded.stderr)
