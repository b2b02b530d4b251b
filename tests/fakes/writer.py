"""Helpers for tests of the offline writer: its prompts, verifying its programs, importing one."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelwright.providers.protocol import render_section


def writer_prompt(source: str, kind: str = "large_step", **sections: str) -> str:
    """A coder prompt as the context manager lays it out: request, task, then the sections given."""
    parts = [
        render_section("request", "Write a faster kernel.", kind=kind),
        render_section("task", source, name="t"),
    ]
    parts += [render_section(tag, body) for tag, body in sections.items()]
    return "\n\n".join(parts)


def check_programs(pool: Any, jobs: list[tuple[str, object, str]], cfg: Any) -> None:
    """Evaluate (label, task, program) jobs together; fail with every mismatch listed."""
    results = pool.evaluate_many([(task, code) for _, task, code in jobs], cfg)
    # A harness error is never the candidate's fault (e.g. CPython 3.11's ast is not thread-safe when the
    # static checks of several jobs run at once): evaluate those once more, one at a time.
    results = [
        pool.evaluate(task, code, cfg) if r.error_kind == "harness_error" else r
        for (_, task, code), r in zip(jobs, results, strict=True)
    ]
    bad = [
        f"{label}: {r.summary()}\n{(r.error or '')[-800:]}"
        for (label, _, _), r in zip(jobs, results, strict=True)
        if not r.correct
    ]
    assert not bad, "\n\n".join(bad)


def import_program(code: str, path: Path) -> ModuleType:
    """A program written to `path` and imported (Triton's @jit needs its source in a file)."""
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
