"""The bench's progress display: one line per finished task, and on a terminal a live panel of the workers.

It only reads the coordinator's session (bench/coordinator.py): the ledger, the queue and each worker's slot.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kernelwright.bench.render import duration
from kernelwright.bench.report import FINAL_STATUSES, TaskRow

if TYPE_CHECKING:
    from rich.console import Console

    from kernelwright.bench.coordinator import Session


def _speed(s: float | None) -> str:
    return "-" if s is None else f"{s:.2f}x"


class Display:
    """Progress: one line per finished task (always); on a terminal also a live panel of the workers."""

    def __init__(self, session: Session, console: Console) -> None:
        self.s = session
        self.console = console
        self.live: Any = None
        self.total = len(session.bench.tasks)

    def __enter__(self) -> Display:
        if self.console.is_terminal:
            from rich.live import Live

            self.live = Live(self._panel(), console=self.console, refresh_per_second=2, transient=True)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)
            self.live = None

    def counts(self) -> tuple[int, int, int, int]:
        rows = self.s.ledger.values()
        done = sum(1 for r in rows if r.status in FINAL_STATUSES)
        failed = sum(1 for r in rows if r.status in ("harness_error", "load_error", "error"))
        running = sum(1 for sl in self.s.slots if sl.current is not None)
        return done, running, failed, len(self.s.todo)

    def eta(self) -> str:
        n = self.s.finished_here
        done, running, _, left = self.counts()
        if left + running == 0:
            return "0 s left"
        if n == 0:
            return "time left: estimating"
        per_task = (time.monotonic() - self.s.started) / n
        return f"~{duration(per_task * (left + running * 0.5))} left"

    def best(self) -> str:
        timed = [r for r in self.s.ledger.values() if r.correct and r.speedup_vs_eager is not None]
        if not timed:
            return ""
        b = max(timed, key=lambda r: r.speedup_vs_eager or 0)
        return f", best {_speed(b.speedup_vs_eager)} ({b.id})"

    def status_line(self) -> str:
        done, running, failed, left = self.counts()
        return (
            f"{done}/{self.total} done, {running} running, {failed} failed, {left} queued{self.best()}; "
            f"{self.eta()}"
        )

    def _panel(self) -> Any:
        from rich.table import Table

        table = Table(title=f"kernelwright bench: {self.status_line()}", title_justify="left", expand=False)
        for col in ("worker", "task", "candidates", "best", "for"):
            table.add_column(col)
        for sl in self.s.slots:
            if sl.current is None:
                state = "stopped" if sl.stopped else "idle" if sl.ready else "starting"
                table.add_row(sl.label, state, "", "", "")
                continue
            best = _speed(sl.best) if sl.best is not None else ("correct" if sl.best_correct else "-")
            progress = f"{sl.done}/{sl.budget}" if sl.budget else ""
            if sl.phase:  # a whole model: region signatures done, and what runs now
                progress = f"regions {progress}: {sl.phase[:60]}"
            table.add_row(
                sl.label,
                sl.current,
                progress,
                best,
                duration(time.monotonic() - sl.task_started),
            )
        return table

    def refresh(self) -> None:
        if self.live is not None:
            self.live.update(self._panel())

    def say(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False)

    def finished(self, row: TaskRow) -> None:
        done, _, _, _ = self.counts()
        if row.status == "correct":
            what = f"correct, {_speed(row.speedup_vs_eager)} vs eager, {_speed(row.speedup_vs_compile)} vs compile"
            if row.speedup_vs_eager is None:
                what = "correct (untimed)"
        else:
            what = {"incorrect": "no correct kernel"}.get(row.status, row.status.replace("_", " "))
        self.say(
            f"[{done}/{self.total}] {row.id}: {what} ({row.evaluations} evaluations, {row.wall_s:.0f} s, "
            f"{row.worker or '-'}) | {self.status_line()}"
        )
