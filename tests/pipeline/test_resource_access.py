"""The memory layer reads a resource given by URI only from what its own configuration allows:
files inside ``allowed_roots`` (symlinks followed), URLs under ``allowed_url_prefixes``. A refused
resource names itself, the roots and the setting, and stores nothing; the ingest step checks
again, so a run whose state names a file (as a workflow started by anyone would) is refused too.
"""

from __future__ import annotations

import hashlib
import http.server
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core.errors import ConfigError, PathNotAllowedError
from memory_core.pipeline.resource_access import ResourceAccess
from memory_core.pipeline.service import MemoryService
from tests.pipeline.conftest import ServiceFactory
from tests.pipeline.layer_kit import ALICE

ALICE_FILTER = {k: (v,) for k, v in ALICE.items()}
SECRET = "The vault combination is 31-41-59 and must never leave this machine.\n"


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file in a folder that is not an allowed root."""
    secret = tmp_path_factory.mktemp("outside") / "secret.txt"
    secret.write_text(SECRET)
    return secret


def _nothing_stored(service: MemoryService, data: bytes) -> None:
    digest = hashlib.sha256(data).hexdigest()
    assert service.store.find_resource(ALICE, digest, service.pipeline_revision) is None
    assert service.store.count_items(ALICE_FILTER) == 0
    assert service.list_categories(ALICE)[0]["item_count"] == 0


def test_a_file_outside_the_allowed_roots_is_refused_naming_path_roots_and_setting(
    make_service: ServiceFactory, tmp_path: Path, outside: Path
) -> None:
    service = make_service()

    for uri in (str(outside), f"file://{outside}", "/etc/passwd", str(tmp_path / ".." / "x")):
        with pytest.raises(PathNotAllowedError) as raised:
            service.memorize(ALICE, uri=uri)
        message = str(raised.value)
        assert repr(uri.removeprefix("file://")) in message, "the path is named"
        assert str(tmp_path.resolve()) in message, "the allowed roots are named"
        assert "allowed_roots" in message, "the setting to change is named"

    _nothing_stored(service, outside.read_bytes())
    assert service.runs() == []


def test_a_symlink_inside_a_root_leading_out_of_it_is_refused(
    make_service: ServiceFactory, tmp_path: Path, outside: Path
) -> None:
    service = make_service()
    (tmp_path / "notes").mkdir()
    link = tmp_path / "notes" / "looks-inside.txt"
    link.symlink_to(outside)
    (tmp_path / "linked-dir").symlink_to(outside.parent, target_is_directory=True)

    for uri in (link, tmp_path / "linked-dir" / "secret.txt"):
        with pytest.raises(PathNotAllowedError, match="outside the allowed roots"):
            service.memorize(ALICE, uri=str(uri))

    _nothing_stored(service, outside.read_bytes())


def test_a_file_inside_the_roots_is_memorized_also_through_an_internal_symlink(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    service = make_service()
    (tmp_path / "notes").mkdir()
    notes = tmp_path / "notes" / "release.md"
    notes.write_text("Our release train ships every second Tuesday from the main branch.\n")
    (tmp_path / "alias.md").symlink_to(notes)

    result = service.memorize(ALICE, uri=str(tmp_path / "alias.md"))

    (item,) = service.store.items_by_id(result.items_added)
    assert "release train" in item.text
    assert service.memorize(ALICE, uri=f"file://{notes}").duplicate


def test_a_run_whose_state_names_a_file_outside_the_roots_is_refused_by_the_ingest_step(
    make_service: ServiceFactory, outside: Path
) -> None:
    """What a durable runner's worker does with a run anyone started: the step checks the
    path itself, whatever the caller of memorize checked or skipped."""
    service = make_service()
    forged = {
        "scope": ALICE,
        "pipeline_revision": service.pipeline_revision,
        "options": {},
        "content_hash": "0" * 64,
        "resource_input": {"kind": "file", "uri": str(outside), "messages": None,
                           "content": None, "mime": None, "metadata": {}},
    }  # fmt: skip

    with pytest.raises(PathNotAllowedError, match=r"secret\.txt"):
        service.run_stored_step("memorize", service.pipeline_revision, "ingest_resource", forged)
    outcome = service.runner.run(service.pipeline("memorize"), forged, service.execute_step)

    assert outcome.status == "failed" and outcome.failed_step == "ingest_resource"
    assert "outside the allowed roots" in (outcome.error or "")
    assert service.store.find_resource(ALICE, "0" * 64, service.pipeline_revision) is None
    _nothing_stored(service, outside.read_bytes())


def test_other_schemes_and_remote_file_uris_are_never_read(make_service: ServiceFactory) -> None:
    service = make_service()
    for uri, reason in (
        ("ftp://example.com/notes.txt", "'ftp' scheme is never read"),
        ("file://fileserver/share/notes.txt", "names a host"),
        ("https://example.com/notes.txt", "under no allowed URL prefix: (none configured)"),
    ):
        with pytest.raises(
            PathNotAllowedError, match=reason.replace("(", r"\(").replace(")", r"\)")
        ):
            service.memorize(ALICE, uri=uri)


def test_the_default_root_is_the_project_folder_of_the_working_directory(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)

    access = ResourceAccess.configure(cwd=project / "src")

    assert access.roots == (project.resolve(),)
    assert ResourceAccess.configure(cwd=Path("/")).roots == (), "/ is never a default root"
    with pytest.raises(PathNotAllowedError, match=r"outside the allowed roots \(none configured\)"):
        ResourceAccess.configure(cwd=Path("/")).read("/etc/hostname")
    (project / "src" / "a.txt").write_text("inside")
    assert access.read("a.txt") == b"inside", "relative paths resolve against the working dir"


def test_a_resource_larger_than_the_limit_is_refused(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    big = tmp_path / "big.txt"
    big.write_text("x" * 2000)
    with pytest.raises(Exception, match="max_resource_bytes"):
        make_service(max_resource_bytes=1000).memorize(ALICE, uri=str(big))


class _Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/team/notes.txt")
            self.end_headers()
            return
        body = b"The on-call rotation changes every Monday at nine.\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join(5)


def test_a_url_is_read_only_under_a_configured_prefix_without_redirects(
    make_service: ServiceFactory, site: str
) -> None:
    refused = make_service()
    with pytest.raises(PathNotAllowedError, match="allowed_url_prefixes"):
        refused.memorize(ALICE, uri=f"{site}/team/notes.txt")

    service = make_service(allowed_url_prefixes=[f"{site}/team/"])
    result = service.memorize(ALICE, uri=f"{site}/team/notes.txt")
    (item,) = service.store.items_by_id(result.items_added)
    assert "on-call rotation" in item.text
    for uri in (f"{site}/other/notes.txt", f"{site}/team/../other.txt", f"{site}/teamwork.txt"):
        with pytest.raises(PathNotAllowedError, match="under no allowed URL prefix"):
            service.memorize(ALICE, uri=uri)
    moving = make_service(allowed_url_prefixes=[f"{site}/"])
    with pytest.raises(Exception, match="HTTP 302"):
        moving.memorize(ALICE, uri=f"{site}/moved")


def test_a_url_prefix_that_is_not_http_is_a_configuration_error(
    make_service: ServiceFactory,
) -> None:
    with pytest.raises(ConfigError, match="allowed_url_prefixes"):
        make_service(allowed_url_prefixes=["file:///etc/"])
