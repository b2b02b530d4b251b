"""The bench report's files, rendered from a `Suite` (bench/report.py): suite.json, suite.md and
suite.html (self-contained: inline SVG plots of fast_p and of the speedup histogram, no scripts, nothing
loaded from elsewhere), each replaced whole; and the one-line headline the console prints.
"""

from __future__ import annotations

import json
import math
import os
from bisect import bisect_right
from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path
from typing import Any, Literal

from kernelwright.bench.report import P_GRID, Aggregate, FastP, Figure, Suite, TaskRow

SUITE_JSON, SUITE_MD, SUITE_HTML = "suite.json", "suite.md", "suite.html"
STATUS_TEXT = {
    "correct": "correct",
    "incorrect": "no kernel",
    "unsupported": "unsupported",
    "harness_error": "harness error",
    "load_error": "load error",
    "error": "error",
    "pending": "not run yet",
}
P_SHOWN = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0, 3.0)
"""The fast_p values the tables show (the JSON and the curves have the whole grid)."""
HIST_EDGES = (0.5, 0.8, 0.95, 1.05, 1.25, 1.5, 2.0, 3.0)
HIST_LABELS = ("<0.5", "0.5-0.8", "0.8-0.95", "0.95-1.05", "1.05-1.25", "1.25-1.5", "1.5-2", "2-3", ">=3")
EAGER_COLOR, COMPILE_COLOR = "#1f77b4", "#d62728"


# -- formatting ---------------------------------------------------------------------------------------------


def _x(v: float | None, spec: str = ".2f", suffix: str = "x") -> str:
    return "-" if v is None else format(v, spec) + suffix


def _ms(r: TaskRow) -> str:
    """The best kernel's median time in ms with its timed calls' 20th-80th percentiles: a wide spread is a
    host-bound forward or a noisy machine, and says how far the speedups beside it can be trusted."""
    if r.runtime_ms is None:
        return "-"
    if r.runtime_p20_ms is None or r.runtime_p80_ms is None:
        return f"{r.runtime_ms:.3g}"
    return f"{r.runtime_ms:.3g} ({r.runtime_p20_ms:.3g}-{r.runtime_p80_ms:.3g})"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def _fig(f: Figure, spec: str = ".2f", suffix: str = "x") -> str:
    return "-" if f.value is None else f"{format(f.value, spec)}{suffix} (n={f.n})"


def duration(s: float) -> str:
    """Seconds as a short duration: 42 s, 3.5 min, 2.1 h."""
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def headline(suite: Suite) -> str:
    """One line: how far the bench is and what it found so far."""
    b, o = suite.bench, suite.overall
    parts = [f"{b['tasks_finished']}/{b['tasks_total']} tasks finished", f"correct {o.correct}/{o.tasks}"]
    if o.failed:
        parts.append(f"{o.failed} could not be judged or run")
    if o.geomean_vs_eager.value is not None:
        parts.append(f"geomean {_fig(o.geomean_vs_eager)} vs eager")
    if o.geomean_vs_compile.value is not None:
        parts.append(f"{_fig(o.geomean_vs_compile)} vs torch.compile")
    return ", ".join(parts)


def _memory_setting(s: dict[str, Any]) -> str:
    """How the bench used memory: off, or where its store was, and whether rules were on."""
    where = s.get("memory") or "~/.kernelwright"
    return str(where) if where == "off" else f"{where} (rules {'off' if s.get('rules') is False else 'on'})"


def _settings_line(b: dict[str, Any]) -> str:
    s = b.get("settings", {})
    devices = ", ".join(b.get("devices") or []) or "-"
    v = b.get("versions") or {}
    return (
        f"model {s.get('model', '-')}, budget {s.get('budget', '-')} per task, seed {s.get('seed', '-')}, "
        f"precision {s.get('precision', '-')}, memory {_memory_setting(s)}, device {devices}, "
        f"workers {len(b.get('workers') or []) or '-'}, "
        f"torch {v.get('torch') or '-'}, triton {v.get('triton') or '-'}"
    )


def _fast_cells(a: Aggregate, which: Literal["eager", "compile"]) -> list[str]:
    return [_pct(a.fast_p.at(p, which)) for p in (0.0, 1.0, 2.0)]


def markdown(suite: Suite) -> str:
    b = suite.bench
    lines = [
        "# kernelwright bench",
        "",
        f"{headline(suite)}.",
        "",
        f"Settings: {_settings_line(b)}. Updated {b.get('updated_at', '-')}; "
        f"elapsed {duration(float(b.get('elapsed_s') or 0))}.",
    ]
    if b.get("timing_note"):
        lines += ["", f"Note: {b['timing_note']}."]
    if not b.get("finished"):
        lines += ["", f"Partial: continue with `kernelwright bench --resume {b.get('out', 'DIR')}`."]
    head = (
        "| group | finished | correct | failed | geomean vs eager | geomean vs compile | fast_0 / fast_1 / "
        "fast_2 vs eager | fast_0 / fast_1 / fast_2 vs compile | % floor (mean) | evals (to best) | wall | GPU |"
    )
    sep = "|---|---|---|---|---|---|---|---|---|---|---|---|"

    def agg_line(a: Aggregate) -> str:
        return (
            f"| {a.name} | {a.tasks}/{a.total} | {a.correct} ({_pct(a.correct_share)}) | {a.failed} | "
            f"{_fig(a.geomean_vs_eager)} | {_fig(a.geomean_vs_compile)} | {' / '.join(_fast_cells(a, 'eager'))} | "
            f"{' / '.join(_fast_cells(a, 'compile'))} | {_fig(a.mean_fraction_of_floor, '.0%', '')} | "
            f"{a.evaluations} ({a.evaluations_to_best}) | {duration(a.wall_s)} | {duration(a.gpu_s)} |"
        )

    lines += ["", "## Overall and per folder", "", head, sep, agg_line(suite.overall)]
    lines += [agg_line(a) for a in suite.suites]
    lines += ["", "## Per op family", "", head, sep]
    lines += [agg_line(a) for a in suite.families]
    o = suite.overall.fast_p
    lines += ["", "## fast_p (overall)", "", "| p | " + " | ".join(f"{p:g}" for p in P_SHOWN) + " |"]
    lines.append("|---|" + "---|" * len(P_SHOWN))
    for which, label, n in (
        ("eager", "vs eager", o.measured_eager),
        ("compile", "vs torch.compile", o.measured_compile),
    ):
        cells = [_pct(o.at(p, which)) for p in P_SHOWN]  # type: ignore[arg-type]
        lines.append(f"| {label} (measured on {n} of {o.tasks}) | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Tasks",
        "",
        "| task | family | status | vs eager | vs compile | ms (p20-p80) | % floor | design | evals (to best) "
        "| wall s | GPU s | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in suite.tasks:
        verdict = (r.verdict or r.error).replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| {r.id} | {r.family} | {STATUS_TEXT[r.status]} | {_x(r.speedup_vs_eager)} | "
            f"{_x(r.speedup_vs_compile)} | {_ms(r)} | {_pct(r.fraction_of_floor)} | "
            f"{r.design.replace('|', '/') or '-'} | "
            f"{r.evaluations} ({r.evaluations_to_best or '-'}) | {r.wall_s:.0f} | {r.gpu_s:.0f} | {verdict} |"
        )
    lines += _unseen_markdown(suite)
    return "\n".join(lines) + "\n"


# -- unseen sizes and repeated failures (the same rows in markdown and HTML) ---------------------------------------


def holds_text(r: TaskRow) -> str:
    """ "holds at N unseen sizes", "does not hold (M of N)", or why it was not checked."""
    judged = [c for c in r.unseen if c.get("correct") is not None]
    if r.holds_unseen is None:
        return r.unseen_note or ("-" if not r.correct else "not checked")
    if r.holds_unseen:
        return f"holds at {len(judged)} unseen size(s)"
    bad = [c for c in judged if not c.get("correct")]
    first = bad[0] if bad else {}
    return f"does not hold ({len(bad)} of {len(judged)}: {first.get('error_kind') or '?'})"


def _sizes_text(r: TaskRow) -> str:
    return "; ".join(",".join(f"{k}={v}" for k, v in c.get("sizes", {}).items()) for c in r.unseen) or "-"


def _kinds_text(kinds: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])) or "none"


def unseen_group_line(a: Aggregate) -> str:
    """One group's unseen-size and repeat figures in a sentence."""
    held = (
        f"{a.holds_unseen}/{a.unseen_checked} best kernels hold at unseen sizes ({_pct(a.holds_unseen_share)})"
        if a.unseen_checked
        else "no best kernel judged at unseen sizes"
    )
    ratio = f"geomean speedup there vs the searched size {_fig(a.geomean_unseen_vs_searched)}"
    per100 = "-" if a.repeats_per_100 is None else f"{a.repeats_per_100:.1f}"
    return (
        f"{a.name}: {held}; {ratio}; {a.repeats} repeated failure(s) judged of {a.candidates} candidates "
        f"({per100} per 100), {a.blocked} stopped before the judge; failures by kind: "
        f"{_kinds_text(a.failed_by_kind)}"
    )


def unseen_rows(rows: Sequence[TaskRow]) -> list[list[str]]:
    """Per finished task: task, holds at unseen sizes, speedup there, vs searched, sizes, failures by
    kind, repeats judged, blocked, the time the unseen sizes took."""
    return [
        [
            r.id,
            holds_text(r),
            _x(r.unseen_speedup_vs_eager),
            _x(r.unseen_vs_searched),
            _sizes_text(r),
            _kinds_text(r.failed_by_kind),
            str(r.repeats),
            str(r.blocked),
            "-" if r.unseen_wall_s is None else f"{r.unseen_wall_s:.0f} s",
        ]
        for r in rows
        if r.finished
    ]


UNSEEN_HEAD = ["task", "unseen sizes", "vs eager there", "vs searched", "sizes", "failures by kind", "repeats",
               "blocked", "judged in"]  # fmt: skip


def _unseen_markdown(suite: Suite) -> list[str]:
    lines = ["", "## Unseen sizes and repeated failures", ""]
    lines += [f"- {unseen_group_line(a)}" for a in [suite.overall, *suite.suites]]
    lines += ["", "| " + " | ".join(UNSEEN_HEAD) + " |", "|" + "---|" * len(UNSEEN_HEAD)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in unseen_rows(suite.tasks)]
    return lines


def _unseen_html(suite: Suite) -> str:
    groups = "".join(f"<li>{escape(unseen_group_line(a))}</li>" for a in [suite.overall, *suite.suites])
    head = "".join(f"<th>{escape(h)}</th>" for h in UNSEEN_HEAD)
    body = "".join(
        f"<tr class='unseen' data-task='{escape(row[0])}'>"
        + "".join(f"<td>{escape(c)}</td>" for c in row)
        + "</tr>"
        for row in unseen_rows(suite.tasks)
    )
    return f"<ul id='unseen-groups'>{groups}</ul><table id='unseen'><tr>{head}</tr>{body}</table>"


# -- HTML -------------------------------------------------------------------------------------------------------

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#212529;max-width:1280px}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #dee2e6}
.headline{font-size:16px;padding:10px 14px;border-radius:6px;background:#f1f3f5;margin:12px 0}
.note{background:#fff9db;padding:8px 12px;border-radius:6px}
.plots{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}
.figure{margin:0} .figure figcaption{font-size:13px;color:#495057;max-width:470px}
table{border-collapse:collapse;font-size:13px} td,th{border:1px solid #dee2e6;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f8f9fa} td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.st-correct{color:#2b8a3e} .st-incorrect,.st-error,.st-load_error{color:#c92a2a} .st-unsupported{color:#868e96} .st-harness_error{color:#e67700}
.st-pending{color:#868e96} .muted{color:#868e96} code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
td code{overflow-wrap:anywhere}
"""


def _svg_open(w: int, h: int, label: str, ident: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{ident}" class="plot" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" role="img" aria-label="{escape(label)}" font-size="11">'
    )


def fast_p_svg(fp: FastP, ident: str, title: str, *, w: int = 460, h: int = 300, note: str = "") -> str:
    """The fast_p curves (vs eager and vs torch.compile) as step lines over p in [0, 3]."""
    compact = w < 400
    ml, mr, mt, mb = 44, 14, 42, 38
    pw, ph = w - ml - mr, h - mt - mb

    def x(p: float) -> float:
        return ml + pw * p / P_GRID[-1]

    def y(v: float) -> float:
        return mt + ph * (1 - v)

    out = [_svg_open(w, h, f"fast_p curves: {title}", ident)]
    out.append(f'<text x="{ml}" y="15" font-size="13" font-weight="600">{escape(title)}</text>')
    for v in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e9ecef"/>')
        out.append(f'<text x="{ml - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.0%}</text>')
    for p in (0, 0.5, 1, 1.5, 2, 2.5, 3):
        out.append(f'<text x="{x(p):.1f}" y="{mt + ph + 15}" text-anchor="middle">{p:g}</text>')
    out.append(
        f'<line x1="{x(1):.1f}" x2="{x(1):.1f}" y1="{mt}" y2="{mt + ph}" stroke="#adb5bd" stroke-dasharray="4 3"/>'
    )
    out.append(f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#ced4da"/>')
    out.append(f'<text x="{ml + pw / 2:.1f}" y="{h - 6}" text-anchor="middle">p (speedup threshold)</text>')
    timed = "" if compact else " timed"
    curves = [
        (fp.vs_eager, EAGER_COLOR, f"eager ({fp.measured_eager}/{fp.tasks}{timed})", "eager"),
        (fp.vs_compile, COMPILE_COLOR, f"torch.compile ({fp.measured_compile}/{fp.tasks}{timed})", "compile"),
    ]
    lx = float(ml)
    drawn = 0
    for values, color, label, cls in curves:
        if values is None:
            continue
        pts: list[str] = []
        for i, v in enumerate(values):
            x0, x1 = x(P_GRID[i]), x(P_GRID[min(i + 1, len(P_GRID) - 1)])
            pts += [f"{x0:.1f},{y(v):.1f}", f"{x1:.1f},{y(v):.1f}"]
        out.append(
            f'<polyline class="curve curve-{cls}" points="{" ".join(pts)}" fill="none" stroke="{color}" '
            f'stroke-width="2.5"><title>fast_p vs {escape(label)}</title></polyline>'
        )
        # the legend, one row above the plot
        out.append(
            f'<line x1="{lx:.0f}" x2="{lx + 18:.0f}" y1="29" y2="29" stroke="{color}" stroke-width="2.5"/>'
            f'<text x="{lx + 22:.0f}" y="33">{escape(label)}</text>'
        )
        lx += 34 + 6.2 * len(label)
        drawn += 1
    if not drawn:
        msg = note or "no speedup measured"
        out.append(
            f'<text class="empty" x="{ml + pw / 2:.1f}" y="{mt + ph / 2:.1f}" text-anchor="middle" '
            f'fill="#868e96">{escape(msg[: 36 if compact else 70])}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def histogram_counts(rows: Sequence[TaskRow], key: Callable[[TaskRow], float | None]) -> list[int]:
    counts = [0] * len(HIST_LABELS)
    for r in rows:
        s = key(r)
        if r.correct and s is not None:
            counts[bisect_right(HIST_EDGES, s)] += 1
    return counts


def histogram_svg(rows: Sequence[TaskRow], ident: str = "speedup-histogram", *, note: str = "") -> str:
    """Correct tasks by speedup bin, bars vs eager and vs torch.compile side by side."""
    w, h, ml, mr, mt, mb = 520, 300, 40, 14, 26, 52
    pw, ph = w - ml - mr, h - mt - mb
    eager = histogram_counts(rows, lambda r: r.speedup_vs_eager)
    comp = histogram_counts(rows, lambda r: r.speedup_vs_compile)
    top = max([*eager, *comp, 1])
    step = max(1, math.ceil(top / 5))
    ymax = step * math.ceil(top / step)

    def y(c: float) -> float:
        return mt + ph * (1 - c / ymax)

    out = [_svg_open(w, h, "histogram of speedups of correct tasks", ident)]
    out.append(f'<text x="{ml}" y="16" font-size="13" font-weight="600">Correct tasks by speedup</text>')
    for c in range(0, ymax + 1, step):
        out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{y(c):.1f}" y2="{y(c):.1f}" stroke="#e9ecef"/>')
        out.append(f'<text x="{ml - 6}" y="{y(c) + 4:.1f}" text-anchor="end">{c}</text>')
    slot = pw / len(HIST_LABELS)
    bar = slot * 0.36
    for i, label in enumerate(HIST_LABELS):
        x0 = ml + i * slot
        for j, (counts, color, what) in enumerate(
            ((eager, EAGER_COLOR, "eager"), (comp, COMPILE_COLOR, "torch.compile"))
        ):
            if counts[i]:
                bx = x0 + slot * 0.12 + j * bar
                out.append(
                    f'<rect class="bar bar-{"eager" if j == 0 else "compile"}" x="{bx:.1f}" y="{y(counts[i]):.1f}" '
                    f'width="{bar:.1f}" height="{y(0) - y(counts[i]):.1f}" fill="{color}"><title>{counts[i]} task(s) '
                    f"at {escape(label)}x vs {what}</title></rect>"
                )
        out.append(
            f'<text x="{x0 + slot / 2:.1f}" y="{mt + ph + 14}" text-anchor="middle" font-size="10">{escape(label)}</text>'
        )
    out.append(f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#ced4da"/>')
    out.append(f'<text x="{ml + pw / 2:.1f}" y="{h - 20}" text-anchor="middle">speedup (x)</text>')
    out.append(
        f'<rect x="{ml + 4}" y="{h - 12}" width="10" height="10" fill="{EAGER_COLOR}"/>'
        f'<text x="{ml + 18}" y="{h - 3}">vs eager</text>'
        f'<rect x="{ml + 84}" y="{h - 12}" width="10" height="10" fill="{COMPILE_COLOR}"/>'
        f'<text x="{ml + 98}" y="{h - 3}">vs torch.compile</text>'
    )
    if not any(eager) and not any(comp):
        out.append(
            f'<text class="empty" x="{ml + pw / 2:.1f}" y="{mt + ph / 2:.1f}" text-anchor="middle" '
            f'fill="#868e96">{escape((note or "no speedup measured")[:80])}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _agg_table(aggs: Sequence[Aggregate], first: str) -> str:
    head = (
        f"<tr><th>{first}</th><th>finished</th><th>correct</th><th>failed</th><th>geomean vs eager</th>"
        "<th>geomean vs compile</th><th>fast_0 / 1 / 2 vs eager</th><th>fast_0 / 1 / 2 vs compile</th>"
        "<th>% floor (mean)</th><th>evals (to best)</th><th>wall</th><th>GPU</th></tr>"
    )
    rows = []
    for a in aggs:
        rows.append(
            f"<tr><td>{escape(a.name)}</td><td class=num>{a.tasks}/{a.total}</td>"
            f"<td class=num>{a.correct} ({_pct(a.correct_share)})</td><td class=num>{a.failed}</td>"
            f"<td class=num>{_fig(a.geomean_vs_eager)}</td><td class=num>{_fig(a.geomean_vs_compile)}</td>"
            f"<td class=num>{' / '.join(_fast_cells(a, 'eager'))}</td>"
            f"<td class=num>{' / '.join(_fast_cells(a, 'compile'))}</td>"
            f"<td class=num>{_fig(a.mean_fraction_of_floor, '.0%', '')}</td>"
            f"<td class=num>{a.evaluations} ({a.evaluations_to_best})</td>"
            f"<td class=num>{duration(a.wall_s)}</td><td class=num>{duration(a.gpu_s)}</td></tr>"
        )
    return f"<table>{head}{''.join(rows)}</table>"


def _task_table(rows: Sequence[TaskRow]) -> str:
    head = (
        "<tr><th>task</th><th>family</th><th>status</th><th>vs eager</th><th>vs compile</th>"
        "<th>ms (p20-p80)</th><th>% floor</th>"
        "<th>design</th><th>evals (to best)</th><th>wall s</th><th>GPU s</th><th>worker</th><th>verdict</th></tr>"
    )
    out = []
    for r in rows:
        name = escape(r.id)
        if r.run_dir and r.status not in ("pending", "load_error"):
            name = f"<a href='{escape(r.run_dir)}/report.html'>{name}</a>"
        out.append(
            f"<tr class='task' data-task='{escape(r.id)}'><td>{name}</td><td>{escape(r.family)}</td>"
            f"<td class='st-{r.status}'>{STATUS_TEXT[r.status]}</td>"
            f"<td class=num>{_x(r.speedup_vs_eager)}</td><td class=num>{_x(r.speedup_vs_compile)}</td>"
            f"<td class=num>{_ms(r)}</td><td class=num>{_pct(r.fraction_of_floor)}</td><td><code>{escape(r.design or '-')}</code></td>"
            f"<td class=num>{r.evaluations} ({r.evaluations_to_best or '-'})</td><td class=num>{r.wall_s:.0f}</td>"
            f"<td class=num>{r.gpu_s:.0f}</td>"
            f"<td>{escape(r.worker or '-')}</td><td>{escape(r.verdict or r.error)}</td></tr>"
        )
    return f"<table id='tasks'>{head}{''.join(out)}</table>"


def render_html(suite: Suite) -> str:
    b = suite.bench
    note = b.get("timing_note") or ""
    short_note = "not timed: CPU (Triton interpreter)" if note else ""
    done = [r for r in suite.tasks if r.finished]
    family_plots = "".join(
        f"<figure class='figure'>{fast_p_svg(a.fast_p, f'fastp-family-{i}', f'{a.name} ({a.tasks} tasks)', w=300, h=210, note=short_note)}</figure>"
        for i, a in enumerate(suite.families)
    )
    if note:  # nothing timed: one line instead of a row of empty plots
        family_plots = "<p class='muted'>Per-family fast_p curves need timings; there are none here.</p>"
    partial = (
        ""
        if b.get("finished")
        else f"<p class='note'>Partial: continue with <code>kernelwright bench --resume "
        f"{escape(str(b.get('out', 'DIR')))}</code>.</p>"
    )
    o = suite.overall.fast_p
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kernelwright bench</title>
<style>{CSS}</style></head><body>
<h1>kernelwright bench</h1>
<div class="muted">{escape(_settings_line(b))}; updated {escape(str(b.get("updated_at", "-")))}, elapsed
{duration(float(b.get("elapsed_s") or 0))}</div>
<div class="headline" id="headline">{escape(headline(suite))}</div>
{f"<p class='note'>Note: {escape(note)}.</p>" if note else ""}{partial}
<div class="plots">
<figure class="figure" id="fig-fastp">{fast_p_svg(o, "fastp-overall", "fast_p: correct and faster than p x baseline", note=short_note)}
<figcaption>Share of all {o.tasks} finished tasks that are correct and more than p times faster than the
baseline (KernelBench's fast_p); failed and untimed tasks count as not fast. The dashed line is p = 1.</figcaption></figure>
<figure class="figure" id="fig-histogram">{histogram_svg(done, note=short_note)}
<figcaption>Correct tasks with a measured speedup, by speedup bin.</figcaption></figure>
</div>
<h2>Per op family</h2>
{_agg_table(suite.families, "family")}
<div class="plots" id="family-plots">{family_plots}</div>
<h2>Overall and per folder</h2>
{_agg_table([suite.overall, *suite.suites], "group")}
<h2>Tasks</h2>
{_task_table(suite.tasks)}
<h2>Unseen sizes and repeated failures</h2>
{_unseen_html(suite)}
<p class="muted">Definitions: geometric means and the mean fraction of the roofline floor are over correct tasks
with a measured speedup (n); fast_p and the correct share are over all finished tasks. suite.json holds every
number here, the whole fast_p grid and every candidate tried.</p>
</body></html>
"""


def write_text_atomic(path: Path, text: str) -> None:
    """Replace `path` whole: written beside it, then renamed over it (a crash leaves the old file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_suite(suite: Suite, out_dir: str | Path) -> list[Path]:
    """suite.json, suite.md and suite.html in `out_dir`, each replaced whole (never half-written)."""
    out = Path(out_dir)
    paths = [out / SUITE_JSON, out / SUITE_MD, out / SUITE_HTML]
    write_text_atomic(paths[0], json.dumps(suite.model_dump(mode="json"), indent=2) + "\n")
    write_text_atomic(paths[1], markdown(suite))
    write_text_atomic(paths[2], render_html(suite))
    return paths
