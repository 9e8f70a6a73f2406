"""Large inputs, cut into batches read one at a time (bounded memory), and ingest progress.

A batch is about ``hierarchy.ingest_batch_bytes`` of the input, cut at the last paragraph
break (else line break, else sentence end, else a UTF-8 character boundary) of its second
half. Where a batch ends depends only on the bytes from where it starts, so an ingest resumed
at a recorded byte offset cuts exactly the batches an uninterrupted one would.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass
from typing import BinaryIO

from memory_core.errors import InvalidInputError

__all__ = ["Batch", "IngestProgress", "ProgressCallback", "file_digest", "read_batches"]

_CUTS = (b"\n\n", b"\n", b". ")
_READ = 1 << 20


@dataclass(frozen=True, slots=True)
class Batch:
    """One batch: ``text`` is the input's bytes ``byte_start:byte_end``, decoded; its first
    character is character ``char_start`` of the whole input."""

    index: int
    byte_start: int
    byte_end: int
    char_start: int
    text: str


@dataclass(frozen=True, slots=True)
class IngestProgress:
    """How far an ingest is: bytes of the input, batches and chunks stored so far."""

    bytes_done: int
    bytes_total: int
    batches_done: int
    chunks_done: int
    new_chunks: int
    batches_skipped: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


ProgressCallback = Callable[[IngestProgress], Awaitable[None]]


def file_digest(stream: BinaryIO) -> str:
    """sha256 of the whole stream (read in 1 MiB blocks), then rewound."""
    digest = hashlib.sha256()
    while block := stream.read(_READ):
        digest.update(block)
    stream.seek(0)
    return digest.hexdigest()


def _cut(buffer: bytes) -> int:
    half = len(buffer) // 2
    for mark in _CUTS:
        at = buffer.rfind(mark, half)
        if at >= 0:
            return at + len(mark)
    end = len(buffer)
    while end > half and (buffer[end - 1] & 0xC0) == 0x80:  # inside a multi-byte character
        end -= 1
    if end > half and buffer[end - 1] >= 0xC0:  # a lead byte whose character is cut off
        end -= 1
    return end if end > half else len(buffer)


def read_batches(
    stream: BinaryIO,
    *,
    batch_bytes: int,
    origin: str,
    start: int = 0,
    char_start: int = 0,
    first_index: int = 0,
) -> Iterator[Batch]:
    """The batches of ``stream`` from byte ``start`` (a batch boundary recorded earlier).

    Raises:
        InvalidInputError: the bytes are not UTF-8 (names ``origin`` and the byte offset).
    """
    stream.seek(start)
    position, chars, index = start, char_start, first_index
    carry = b""
    while True:
        block = stream.read(max(1, batch_bytes - len(carry)))
        buffer = carry + block
        if not buffer:
            return
        end = len(buffer) if not block else _cut(buffer)
        piece, carry = buffer[:end], buffer[end:]
        try:
            text = piece.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InvalidInputError(
                f"{origin} is not UTF-8 text (byte {position + error.start:,})",
                hint="convert it to UTF-8 first (e.g. iconv -t utf-8)",
                details={"byte": position + error.start},
            ) from None
        yield Batch(index, position, position + len(piece), chars, text)
        position += len(piece)
        chars += len(text)
        index += 1
        if not block and not carry:
            return
