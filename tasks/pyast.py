"""`ast.parse` for code that may run in several threads of one process at once.

Graph nodes run in threads (a LangGraph server runs several runs at once), and CPython 3.11's conversion
of a parsed tree into `ast` objects keeps its recursion depth in state shared by the threads: two threads
parsing at once can fail with "SystemError: AST constructor recursion depth mismatch" (seen on 3.11.7, two
Studio runs on one server). One lock around the call keeps them apart; a parse takes milliseconds.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_LOCK = threading.Lock()


def parse_python(source: str, filename: str = "<unknown>", mode: str = "exec", **kwargs: Any) -> Any:
    """`ast.parse(source, filename, mode, **kwargs)`, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename, mode, **kwargs)
