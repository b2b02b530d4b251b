"""A real Chroma server for the tests of this folder: `chroma run` on a free loopback port.

`chroma` gives the server itself (stop it, start it again on the same port and data), `chroma_server`
its URL; `running_chroma` starts one for a wider scope.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest


def _chroma_bin() -> str | None:
    here = Path(sys.executable).parent / "chroma"
    return str(here) if here.exists() else shutil.which("chroma")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ChromaServer:
    """`chroma run --path DATA` on one loopback port; `start` returns once it answers its heartbeat."""

    def __init__(self, exe: str, data: Path, log: Path) -> None:
        self.exe, self.data, self.log = exe, data, log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[str] | None = None

    def start(self, timeout: float = 60) -> None:
        assert self.proc is None, "already running"
        self._log = self.log.open("a")
        self.proc = subprocess.Popen(
            [self.exe, "run", "--path", str(self.data), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
        deadline = time.time() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"chroma exited with {self.proc.returncode}: {self.log.read_text()[-1500:]}"
                )
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1) as resp:
                    if resp.status == 200 and any("heartbeat" in k for k in json.loads(resp.read())):
                        return
            except OSError:
                pass
            if time.time() > deadline:
                raise AssertionError(f"chroma did not answer its heartbeat within {timeout} s")
            time.sleep(0.05)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
        if self._log is not None:
            self._log.close()
            self._log = None


@contextmanager
def running_chroma(folder: Path) -> Iterator[ChromaServer]:
    """A Chroma server with its data and log in `folder`, stopped on the way out."""
    exe = _chroma_bin()
    if exe is None:
        pytest.skip("the chroma command is not installed")
    server = ChromaServer(exe, folder / "server-data", folder / "chroma.log")
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def chroma(tmp_path: Path) -> Iterator[ChromaServer]:
    with running_chroma(tmp_path) as server:
        yield server


@pytest.fixture
def chroma_server(chroma: ChromaServer) -> str:
    return chroma.url
