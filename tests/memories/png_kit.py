"""A small PNG reader for screenshot checks (8-bit RGB / RGBA, non-interlaced: what Chromium
writes), so the browser test needs no imaging library."""

from __future__ import annotations

import struct
import zlib

import numpy as np

__all__ = ["read_png"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def read_png(data: bytes) -> np.ndarray:
    """The image as a ``(height, width, channels)`` uint8 array.

    Raises:
        ValueError: not a PNG, or a kind this reader does not handle.
    """
    if not data.startswith(_SIGNATURE):
        raise ValueError("not a PNG")
    pos, idat = len(_SIGNATURE), []
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG: depth {depth}, color type {color}")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8)
    stride = width * channels
    rows = raw.reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        kind, line = int(rows[y, 0]), rows[y, 1:].astype(np.int32)
        if kind == 0:
            cur = line
        elif kind == 2:
            cur = (line + prev) & 0xFF
        elif kind == 1:
            cur = line.copy()
            for x in range(channels, stride):
                cur[x] = (cur[x] + cur[x - channels]) & 0xFF
        else:
            cur = _sequential(kind, line, prev, channels)
        out[y] = cur
        prev = cur
    return out.reshape(height, width, channels)


def _sequential(kind: int, line: np.ndarray, prev: np.ndarray, bpp: int) -> np.ndarray:
    cur = line.tolist()
    up = prev.tolist()
    for x in range(len(cur)):
        a = cur[x - bpp] if x >= bpp else 0
        b = up[x]
        if kind == 3:
            cur[x] = (cur[x] + (a + b) // 2) & 0xFF
        elif kind == 4:
            c = up[x - bpp] if x >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            cur[x] = (cur[x] + pred) & 0xFF
        else:
            raise ValueError(f"bad PNG filter {kind}")
    return np.array(cur, dtype=np.int32)
