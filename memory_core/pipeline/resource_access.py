"""What the memory layer reads when a memorize names its resource by URI: the trust boundary.

A memorize whose resource is a path, a ``file://`` URI or a URL makes the process that runs the
ingest step read it. That process may be a Temporal worker running stored steps for anyone who
can start workflows on its task queue, so what it may read is decided by its own configuration,
never by the request:

- local files only inside the allowed roots: ``MemoryService.create(allowed_roots=[...])`` or
  ``allowed_roots`` in the layer file; by default the project folder of the process (the git
  root of its working directory, else the directory itself; a home folder or ``/`` is never a
  default root). The check resolves ``..`` and every symlink, so a link inside a root that
  leads out of it is refused; the file is opened by its resolved path without following a
  final symlink, and must be a regular file;
- ``http(s)`` URLs only under a configured prefix (``allowed_url_prefixes``; none by default),
  fetched without following redirects;
- any other scheme never.

A refused resource fails the step with :class:`PathNotAllowedError` naming the resource, the
allowed roots (or prefixes) and the setting to change; nothing is stored.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from memory_core.allowed_paths import resolve_inside
from memory_core.errors import (
    ConfigError,
    LimitExceededError,
    NotFoundError,
    PathNotAllowedError,
)
from memory_core.scope import find_project_root, is_never_a_project

__all__ = ["DEFAULT_MAX_RESOURCE_BYTES", "ResourceAccess"]

DEFAULT_MAX_RESOURCE_BYTES = 64 * 1024 * 1024
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_ROOTS_HINT = (
    "memorize files inside the allowed roots, or add the folder to allowed_roots "
    "(MemoryService.create(allowed_roots=[...]) or allowed_roots = [...] in the layer file) "
    "of the process that runs the steps (the Temporal worker's own service, for Temporal)"
)
_URL_HINT = (
    "pass the content instead, or allow the URL's prefix with allowed_url_prefixes "
    "(MemoryService.create(allowed_url_prefixes=['https://host/path/']) or "
    "allowed_url_prefixes = [...] in the layer file)"
)


@dataclass(frozen=True)
class ResourceAccess:
    """The local folders and URL prefixes one service may read resources from.

    Attributes:
        roots: resolved folders; a local resource must resolve inside one of them.
        url_prefixes: ``http(s)://host/path`` prefixes a URL resource must start with.
        base: the folder relative paths are resolved against.
        max_bytes: the largest resource read.
    """

    roots: tuple[Path, ...]
    url_prefixes: tuple[str, ...]
    base: Path
    max_bytes: int = DEFAULT_MAX_RESOURCE_BYTES

    @classmethod
    def configure(
        cls,
        allowed_roots: Sequence[str | Path] | None = None,
        allowed_url_prefixes: Sequence[str] = (),
        *,
        cwd: Path | None = None,
        max_bytes: int = DEFAULT_MAX_RESOURCE_BYTES,
    ) -> ResourceAccess:
        """The access of a service: the given roots (relative ones against ``cwd``), else the
        project folder of ``cwd``; the given URL prefixes, else none.

        Raises:
            ConfigError: a URL prefix that is not ``http(s)://host[/path]``, or a bad limit.
        """
        base = (cwd or Path.cwd()).resolve()
        if allowed_roots is None:
            project = find_project_root(base)
            roots: tuple[Path, ...] = () if is_never_a_project(project) else (project,)
        else:
            roots = tuple(
                (base / Path(r).expanduser()).resolve(strict=False) for r in allowed_roots
            )
        for prefix in allowed_url_prefixes:
            parts = urlsplit(prefix)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(
                    f"allowed_url_prefixes entry {prefix!r} is not an http(s)://host[/path] URL",
                    hint="e.g. allowed_url_prefixes=['https://docs.example.com/handbook/']",
                )
        if max_bytes < 1:
            raise ConfigError(f"max_resource_bytes {max_bytes} must be >= 1", hint="e.g. 67108864")
        return cls(roots, tuple(allowed_url_prefixes), base, max_bytes)

    def describe(self) -> dict[str, list[str]]:
        """The roots and prefixes, for messages and the service's provider summary."""
        return {
            "allowed_roots": [str(r) for r in self.roots],
            "allowed_url_prefixes": list(self.url_prefixes),
        }

    def read(self, uri: str) -> bytes:
        """The bytes of a resource given as a path, a ``file://`` URI or an allowed URL.

        Raises:
            PathNotAllowedError: outside the allowed roots (after symlinks), a URL under no
                allowed prefix, another scheme, or not a regular file.
            NotFoundError: an allowed resource that cannot be read.
            LimitExceededError: larger than ``max_bytes``.
        """
        match = _SCHEME.match(uri)
        scheme = match.group(1).lower() if match else None
        if scheme in ("http", "https"):
            return self._fetch(uri)
        if scheme not in (None, "file"):
            raise PathNotAllowedError(
                f"resource URI {uri[:200]!r}: the {scheme!r} scheme is never read",
                hint="pass a local path, a file:// URI, an allowed http(s) URL, or the content",
            )
        return self._read_file(uri, self._local_path(uri) if scheme == "file" else uri)

    def _local_path(self, uri: str) -> str:
        rest = uri[len("file://") :]
        if rest.startswith("localhost/"):
            rest = rest[len("localhost") :]
        if not rest.startswith("/"):
            raise PathNotAllowedError(
                f"resource URI {uri[:200]!r} names a host; only local files are read",
                hint="use file:///absolute/path",
            )
        return rest

    def _read_file(self, uri: str, path: str) -> bytes:
        resolved, _root = resolve_inside(
            path, self.roots, cwd=self.base, what="resource path", hint=_ROOTS_HINT
        )
        try:
            # The resolved path, not following a last-moment symlink put in its place.
            fd = os.open(resolved, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError as exc:
            raise NotFoundError(
                f"cannot read resource {uri[:200]!r}: {exc.strerror or exc}",
                hint="pass a readable local path or file:// URI, or the content itself",
            ) from exc
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise PathNotAllowedError(
                    f"resource {uri[:200]!r} is not a regular file",
                    hint="memorize a regular file (not a folder, device or pipe)",
                )
            data = handle.read(self.max_bytes + 1)
        self._check_size(uri, len(data))
        return data

    def _url_allowed(self, uri: str) -> bool:
        url = urlsplit(uri)
        path = url.path or "/"
        if ".." in path.split("/") or url.username or url.password:
            return False  # a prefix must not be climbed out of, nor a host spoofed
        for prefix in self.url_prefixes:
            allowed = urlsplit(prefix)
            if (url.scheme, url.netloc.lower()) != (allowed.scheme, allowed.netloc.lower()):
                continue
            base = allowed.path or "/"
            if (
                path.startswith(base)
                if base.endswith("/")
                else (path == base or path.startswith(base + "/"))
            ):
                return True
        return False

    def _fetch(self, uri: str) -> bytes:
        if not self._url_allowed(uri):
            shown = ", ".join(self.url_prefixes) or "(none configured)"
            raise PathNotAllowedError(
                f"resource URL {uri[:200]!r} is under no allowed URL prefix: {shown}",
                hint=_URL_HINT,
                details={"url": uri[:200], "allowed_url_prefixes": list(self.url_prefixes)},
            )
        import httpx

        try:
            with (
                httpx.Client(follow_redirects=False, timeout=30.0) as client,
                client.stream("GET", uri) as response,
            ):
                if response.status_code != 200:
                    raise NotFoundError(
                        f"cannot read resource URL {uri[:200]!r}: HTTP {response.status_code}",
                        hint="check the URL (redirects are not followed)",
                    )
                data = bytearray()
                for chunk in response.iter_bytes():
                    data += chunk
                    self._check_size(uri, len(data))
                return bytes(data)
        except httpx.HTTPError as exc:
            raise NotFoundError(
                f"cannot read resource URL {uri[:200]!r}: {exc}", hint="check the URL"
            ) from exc

    def _check_size(self, uri: str, size: int) -> None:
        if size > self.max_bytes:
            raise LimitExceededError(
                f"resource {uri[:200]!r} is too large",
                value=size,
                limit=self.max_bytes,
                setting="max_resource_bytes",
                hint="pass max_resource_bytes to MemoryService.create, or memorize a smaller file",
            )
