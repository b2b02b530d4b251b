"""The one error a bad task file raises, and the helpers that keep its message to one line."""

from __future__ import annotations

import traceback


class TaskError(ValueError):
    """A task file that cannot be used as a reference: the message is one line and names the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message, limit=400))


def one_line(text: str, *, limit: int = 240) -> str:
    """The first non-empty line of `text`, whitespace collapsed, cut to `limit` characters.

    Torch errors often run to many lines (C++ backtraces, hints); the first line carries the cause.
    """
    for line in str(text).splitlines():
        line = " ".join(line.split())
        if line:
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


def describe_exception(exc: BaseException, filename: str | None = None) -> str:
    """`ExcType: first line of the message`, plus the task file line it came from when known."""
    text = one_line(str(exc))
    head = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if filename is not None:
        # The innermost frame that belongs to the task file points at the line the user can fix.
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
        if frames:
            head += f" (line {frames[-1].lineno})"
    return head
