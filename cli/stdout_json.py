"""Stdout that holds only the JSON, for the commands that print JSON (`--json`).

A task's own code prints (at its import, in get_inputs, in forward), and it runs in child processes
(the task loader, judges) and, for the offline writer, in this one. `json_only_stdout()` sends all of
that to stderr: this process's `sys.stdout` becomes `sys.stderr`, and file descriptor 1, which child
processes inherit, becomes a copy of descriptor 2. `print_json` writes to the real stdout.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

_json_out: TextIO | None = None


@contextmanager
def json_only_stdout() -> Iterator[None]:
    """While held, stdout (this process's and its children's) goes to stderr; `print_json` does not."""
    global _json_out
    saved = sys.stdout
    saved.flush()
    try:
        fd = saved.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        fd = -1  # a stream with no descriptor (a test's capture): JSON goes there, the rest to stderr
    real_fd = -1
    if fd == 1:
        real_fd = os.dup(1)
        os.dup2(2, 1)
        _json_out = open(real_fd, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 - closed below
    else:
        _json_out = saved
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout.flush()
        out, _json_out = _json_out, None
        out.flush()
        sys.stdout = saved
        if real_fd >= 0:
            out.close()
            os.dup2(real_fd, 1)
            os.close(real_fd)


def print_json(text: str) -> None:
    """Write one JSON document (and a newline) to the real stdout."""
    out = _json_out if _json_out is not None else sys.stdout
    out.write(text + "\n")
    out.flush()
