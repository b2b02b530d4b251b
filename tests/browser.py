"""Headless Chromium for tests of HTML reports: the DOM after the browser parsed the page, and screenshots
read back into pixels (a small PNG reader, so no imaging library is needed).

Tests that use it skip, saying why, where no Chromium binary is on PATH. Chromium is started with the
flags that keep it off the network (this machine has none, and without them it waits on connections) and
with a fresh profile each time.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest

BINARIES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def chromium() -> str:
    """The Chromium binary, or a skip that says how to get one."""
    for name in BINARIES:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(
        "no Chromium binary on PATH (apt-get install chromium): the HTML report is tested in a real browser"
    )


def _run(page: Path, extra: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="kw-chromium-") as profile:
        return subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def dump_dom(page: Path) -> str:
    """The page's DOM as Chromium serialises it after loading it."""
    done = _run(page, ["--dump-dom"])
    assert done.returncode == 0 and "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout


def screenshot(page: Path, out: Path, width: int, height: int) -> list[bytes]:
    """Chromium's screenshot of the page in a width x height window, as rows of RGB bytes."""
    done = _run(page, [f"--screenshot={out}", f"--window-size={width},{height}"])
    assert done.returncode == 0 and out.is_file(), done.stderr[-2000:]
    w, h, rows = read_png(out.read_bytes())
    assert (w, h) == (width, height)
    return rows


def read_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        prev = line
        rgb = line if channels == 3 else bytes(v for j, v in enumerate(line) if j % 4 != 3)
        rows.append(bytes(rgb))
    return width, height, rows


def count_colour(rows: list[bytes], hex_colour: str, tolerance: int = 30) -> int:
    """Pixels within `tolerance` (sum of channel differences) of a #rrggbb colour."""
    r0, g0, b0 = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    n = 0
    for row in rows:
        for x in range(0, len(row), 3):
            if abs(row[x] - r0) + abs(row[x + 1] - g0) + abs(row[x + 2] - b0) <= tolerance:
                n += 1
    return n
