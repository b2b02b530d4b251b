"""report.html for one optimize run, written by the finalize node (nodes/finalize.py): one self-contained
page, no scripts, no network.

It draws the search tree (inline SVG: nodes by depth, coloured by outcome, edges by action), plots the
speedup of every correct attempt and the best so far over the attempts (correctness over attempts when
timing was not meaningful), lists the attempts (each with its full feedback, the model's answer and the
program taken from it, collapsed), and shows the rules and cases the context manager injected into the
prompts (and what it cut), with the rules this run learned. It links the run's kernel.py when there is
one. A kernel without a `# kernelwright:` header is named by its Triton kernels.

Read at a laptop's width (tests/unit/test_report_page.py looks at it in Chromium): an attempt's numbers
are one row and its feedback, answer, program and prompt a full-width row below; each rule and case of
the run's prompts has a short name (R1, C1) that the attempts use and the context table explains, with
why it was chosen.
"""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

from kernelwright.nodes.records import Attempt, ContextItem, OptimizeResult
from kernelwright.nodes.repeats import failure_counts, failures_by_design

STATUS_COLOR = {
    "root": "#9aa5b1",
    "correct": "#2f9e44",
    "wrong": "#f08c00",
    "failed": "#e03131",
    "pending": "#ced4da",
}
ACTION_STYLE = {
    "large_step": 'stroke="#1c7ed6" stroke-width="2.5"',
    "small_step": 'stroke="#495057" stroke-width="1.5"',
    "repair": 'stroke="#e03131" stroke-width="1.5" stroke-dasharray="4 3"',
}

# Each attempt is two rows of the attempts table: its numbers, then one full-width cell with its feedback,
# the model's answer, the program and its prompt, so that prose and code get the page's width, not a column's.
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;padding:0 24px;
 color:#212529;max-width:1280px;line-height:1.4}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #dee2e6}
h3{font-size:15px;margin-bottom:6px}
.verdict{font-size:16px;padding:10px 14px;border-radius:6px;background:#f1f3f5;margin:12px 0}
.verdict.good{background:#ebfbee}.verdict.bad{background:#fff5f5}
table{border-collapse:collapse;font-size:13px} td,th{border:1px solid #dee2e6;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f8f9fa} code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:0} .muted{color:#868e96} .legend span{margin-right:14px}
table.wide{width:100%} td.num{text-align:right;white-space:nowrap} td.id{white-space:nowrap}
td.design code{overflow-wrap:anywhere}
tr.attempt td{border-bottom:none;background:#f8f9fa} tr.attempt td.status{font-weight:600}
tr.detail td{border-top:none;padding:6px 8px 12px 28px}
.feedback{margin:0 0 6px} details{margin:4px 0} summary{cursor:pointer;color:#1c7ed6}
details pre.code{white-space:pre;overflow-x:auto;max-height:36em;overflow-y:auto;background:#f8f9fa;
 border:1px solid #e9ecef;padding:8px;margin-top:4px}
details pre.text{background:#f8f9fa;border:1px solid #e9ecef;padding:8px;margin-top:4px;max-height:36em;overflow-y:auto}
.line{margin:2px 0} .label{color:#495057;font-weight:600;margin-right:6px}
ul.prompt{margin:2px 0 0;padding-left:20px} ul.prompt li{margin:1px 0}
a.ref{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;text-decoration:none}
"""


def _fmt(x: float | None, spec: str = ".2f", none: str = "-", unit: str = "") -> str:
    """A number with its unit, or `none` alone (never "- ms")."""
    return none if x is None else format(x, spec) + unit


def _details(summary: str, body: str, *, code: bool = False) -> str:
    """A collapsed block: code keeps its lines (scrolling sideways), prose wraps to the page's width."""
    if not body.strip():
        return ""
    inner = f"<pre class='{'code' if code else 'text'}'>{escape(body)}</pre>"
    return f"<details><summary>{escape(summary)}</summary>{inner}</details>"


def _layout(nodes: list[dict[str, object]]) -> dict[str, tuple[float, int]]:
    """x (in leaf slots) and depth per node: leaves left to right in tree order, parents centred."""
    children: dict[str | None, list[str]] = {}
    for n in nodes:
        children.setdefault(n["parent"], []).append(str(n["id"]))  # type: ignore[arg-type]
    pos: dict[str, tuple[float, int]] = {}
    next_slot = [0.0]

    def place(nid: str, depth: int) -> float:
        kids = children.get(nid, [])
        if not kids:
            x = next_slot[0]
            next_slot[0] += 1
        else:
            xs = [place(k, depth + 1) for k in kids]
            x = (min(xs) + max(xs)) / 2
        pos[nid] = (x, depth)
        return x

    for root in children.get(None, []):
        place(root, 0)
    return pos


def tree_svg(result: OptimizeResult) -> str:
    nodes = list(result.search.get("nodes_detail", []))  # type: ignore[call-overload]
    if not nodes:
        return "<p class='muted'>No nodes.</p>"
    pos = _layout(nodes)
    by_id = {str(n["id"]): n for n in nodes}
    dx, dy, pad = 64, 70, 30
    width = int(max(x for x, _ in pos.values()) * dx + 2 * pad + 40)
    height = int(max(d for _, d in pos.values()) * dy + 2 * pad + 20)
    best = result.best.node_id if result.best else None
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-size="11">']
    for n in nodes:
        nid = str(n["id"])
        if n["parent"] is None or str(n["parent"]) not in pos:
            continue
        x1, d1 = pos[str(n["parent"])]
        x2, d2 = pos[nid]
        style = ACTION_STYLE.get(str(n["action"]), 'stroke="#adb5bd"')
        parts.append(
            f'<line x1="{pad + x1 * dx}" y1="{pad + d1 * dy}" x2="{pad + x2 * dx}" y2="{pad + d2 * dy}" {style}/>'
        )
    for nid, (x, d) in pos.items():
        n = by_id[nid]
        cx, cy = pad + x * dx, pad + d * dy
        color = STATUS_COLOR.get(str(n["status"]), "#adb5bd")
        ring = ' stroke="#fab005" stroke-width="4"' if nid == best else ' stroke="#fff" stroke-width="1"'
        sp = n.get("speedup")
        label = (
            "ref"
            if n["status"] == "root"
            else (f"{sp:.2f}x" if isinstance(sp, int | float) else str(n["status"]))
        )
        title = escape(
            f"{nid} {n['action'] or 'reference'} {n['status']} reward={_fmt(n.get('reward'), '.3f')}"
        )  # type: ignore[arg-type]
        parts.append(
            f'<g><title>{title}</title><circle cx="{cx}" cy="{cy}" r="13" fill="{color}"{ring}/>'
            f'<text x="{cx}" y="{cy + 4}" text-anchor="middle" fill="#fff" font-weight="bold">{escape(nid)}</text>'
            f'<text x="{cx}" y="{cy + 27}" text-anchor="middle" fill="#495057">{escape(label)}</text></g>'
        )
    parts.append("</svg>")
    legend = (
        "<p class='legend'>"
        + "".join(
            f"<span><svg width='12' height='12'><circle cx='6' cy='6' r='6' fill='{c}'/></svg> {s}</span>"
            for s, c in STATUS_COLOR.items()
            if s != "pending"
        )
        + "<span>edges: <b style='color:#1c7ed6'>large step</b>, small step, <b style='color:#e03131'>repair"
        "</b> (dashed)</span><span>gold ring: best kernel</span></p>"
    )
    return "".join(parts) + legend


def progress_svg(result: OptimizeResult, attempts: list[Attempt]) -> str:
    if not attempts:
        return "<p class='muted'>No attempts.</p>"
    ordered = sorted(attempts, key=lambda a: a.seq)
    w, h, pad = 640, 240, 44
    n = len(ordered)

    def x_of(i: int) -> float:
        return pad + (w - 2 * pad) * (i / max(1, n - 1))

    timed = [a for a in ordered if a.status == "correct" and a.timing.speedup_vs_eager is not None]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-size="11">']
    parts.append(f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#868e96"/>')
    parts.append(f'<line x1="{pad}" y1="{pad / 2}" x2="{pad}" y2="{h - pad}" stroke="#868e96"/>')
    parts.append(f'<text x="{w / 2}" y="{h - 8}" text-anchor="middle">attempt (in planning order)</text>')
    if timed:
        speeds = [a.timing.speedup_vs_eager or 1.0 for a in timed] + [1.0]
        lo, hi = math.log10(min(speeds) / 1.2), math.log10(max(speeds) * 1.2)

        def y_of(s: float) -> float:
            return h - pad - (h - 1.5 * pad) * (math.log10(s) - lo) / max(1e-9, hi - lo)

        parts.append(
            f'<line x1="{pad}" y1="{y_of(1.0)}" x2="{w - pad}" y2="{y_of(1.0)}" stroke="#adb5bd" stroke-dasharray="3 3"/>'
            f'<text x="{w - pad + 2}" y="{y_of(1.0) + 4}">1x</text>'
        )
        parts.append(
            f'<text x="12" y="{h / 2}" transform="rotate(-90 12 {h / 2})" text-anchor="middle">speedup vs eager (log)</text>'
        )
        best = None
        path = []
        for i, a in enumerate(ordered):
            s = a.timing.speedup_vs_eager if a.status == "correct" else None
            if s is not None:
                best = s if best is None else max(best, s)
                parts.append(
                    f'<circle cx="{x_of(i)}" cy="{y_of(s)}" r="4" fill="#2f9e44"><title>{escape(a.node_id)} {s:.3f}x</title></circle>'
                )
            else:
                parts.append(
                    f'<text x="{x_of(i)}" y="{h - pad - 4}" text-anchor="middle" fill="#e03131">x<title>'
                    f"{escape(a.node_id)} {a.status}</title></text>"
                )
            if best is not None:
                path.append(f"{x_of(i)},{y_of(best)}")
        if path:
            parts.append(
                f'<polyline points="{" ".join(path)}" fill="none" stroke="#fab005" stroke-width="2"/>'
            )
        note = "green dots: correct attempts; gold line: best so far; red x: incorrect attempts"
    else:
        for i, a in enumerate(ordered):
            ok = a.status == "correct"
            y = pad if ok else h - pad - 10
            color = "#2f9e44" if ok else "#e03131"
            parts.append(
                f'<circle cx="{x_of(i)}" cy="{y}" r="5" fill="{color}"><title>{escape(a.node_id)} {a.status}</title></circle>'
            )
        parts.append(
            f'<text x="{pad + 4}" y="{pad - 8}">correct</text><text x="{pad + 4}" y="{h - pad - 18}">incorrect</text>'
        )
        note = "no meaningful timing in this run: the plot shows correctness per attempt, not speed"
    parts.append("</svg>")
    return "".join(parts) + f"<p class='muted'>{escape(note)}</p>"


ContextKey = tuple[str, str]
"""(kind, id or text) of a rule or case the context manager considered."""


def context_refs(attempts: list[Attempt]) -> dict[ContextKey, str]:
    """A short name per rule and case injected in the run ("R1", "C2"), in order of first use."""
    refs: dict[ContextKey, str] = {}
    counts = {"rule": 0, "case": 0}
    for a in sorted(attempts, key=lambda a: a.seq):
        for item in a.context.injected if a.context else []:
            key = (item.kind, item.id or item.text)
            if item.kind in counts and key not in refs:
                counts[item.kind] += 1
                refs[key] = f"{item.kind[0].upper()}{counts[item.kind]}"
    return refs


def _context_tables(attempts: list[Attempt], refs: dict[ContextKey, str]) -> str:
    injected: dict[ContextKey, tuple[ContextItem, list[str]]] = {}
    cut: dict[ContextKey, tuple[ContextItem, list[str]]] = {}
    for a in attempts:
        if a.context is None:
            continue
        for item in a.context.injected:
            if item.kind in ("rule", "case"):
                key = (item.kind, item.id or item.text)
                injected.setdefault(key, (item, []))[1].append(a.node_id)
        for item in a.context.cut:
            if item.kind in ("rule", "case"):
                key = (item.kind, item.id or item.text)
                cut.setdefault(key, (item, []))[1].append(a.node_id)

    def table(rows: dict[ContextKey, tuple[ContextItem, list[str]]], empty: str, why: str) -> str:
        if not rows:
            return f"<p class='muted'>{empty}</p>"
        out = [
            "<table class='wide'><tr><th></th><th>kind</th><th>text</th><th>tier</th><th>prompts</th>"
            f"<th>{why}</th><th>id</th></tr>"
        ]
        order = sorted(
            rows.items(), key=lambda kv: (kv[0][0] != "rule", _ref_order(refs.get(kv[0])), -len(kv[1][1]))
        )
        for key, (item, nodes) in order:
            ref = refs.get(key, "")
            anchor = f" id='ctx-{ref}'" if ref and rows is injected else ""
            out.append(
                f"<tr{anchor}><td class='id'><b>{escape(ref)}</b></td><td>{escape(key[0])}</td>"
                f"<td>{escape(item.text[:300])}</td><td>{escape(item.tier)}</td>"
                f"<td>{escape(', '.join(dict.fromkeys(nodes)))}</td><td>{escape(item.reason or '-')}</td>"
                f"<td class='id'><code class='muted'>{escape(item.id)}</code></td></tr>"
            )
        out.append("</table>")
        return "".join(out)

    return (
        "<h3>Injected</h3>"
        + table(injected, "No rules or cases were injected (an empty memory, or none relevant).", "why")
        + "<h3>Cut for the token budget</h3>"
        + table(cut, "Nothing relevant was cut.", "why cut")
    )


def _ref_order(ref: str | None) -> int:
    return int(ref[1:]) if ref and ref[1:].isdigit() else 1_000_000


def prompt_list(a: Attempt, refs: dict[ContextKey, str]) -> str:
    """The rules and cases in an attempt's prompt, each by its short name (a link to the context table)
    and what it says: a rule's words, a case's outcome and design."""
    items = [i for i in (a.context.injected if a.context else []) if i.kind in ("rule", "case")]
    if not items:
        return "<span class='muted'>no rules or cases</span>"
    lines = []
    for item in sorted(
        items, key=lambda i: (i.kind != "rule", _ref_order(refs.get((i.kind, i.id or i.text))))
    ):
        ref = refs.get((item.kind, item.id or item.text), "")
        text = item.text if len(item.text) <= 160 else item.text[:157] + "..."
        lines.append(
            f"<li><a class='ref' href='#ctx-{escape(ref)}' title='{escape(item.kind)} {escape(item.id)}'>"
            f"{escape(ref)}</a> {escape(text or item.id)}</li>"
        )
    return f"<ul class='prompt'>{''.join(lines)}</ul>"


def versus_parent(a: Attempt, attempts: list[Attempt]) -> str:
    """A correct, timed attempt's speedup over its parent's ("1.20x, beat it"); the root is eager PyTorch."""
    mine = a.timing.speedup_vs_eager if a.status == "correct" else None
    if mine is None:
        return "-"
    parent = next((p for p in attempts if p.node_id == a.parent), None)
    theirs = (
        1.0 if parent is None else (parent.timing.speedup_vs_eager if parent.status == "correct" else None)
    )
    if not theirs:
        return "parent had no speedup"
    ratio = mine / theirs
    return f"{ratio:.2f}x, {'beat it' if ratio > 1.0 else 'did not beat it'}"


def failures_section(attempts: list[Attempt]) -> str:
    """Failed attempts per design and error kind: how many were judged, how many of those repeated an
    earlier failure (the goal is none) and how many repeats were stopped before the judge."""
    counts = failure_counts(attempts)
    rows = failures_by_design(attempts)
    if not rows:
        return "<p class='muted'>No attempt failed.</p>"
    failed = sum(r.failed for r in rows)
    closed = [str(d) for d in counts["closed_designs"]]  # type: ignore[attr-defined]
    blocked = int(counts["blocked"])  # type: ignore[call-overload]
    summary = (
        f"<p>{failed} of {counts['candidates']} attempts failed at the judge; {counts['repeats']} of them "
        f"repeated an earlier failure; {blocked} {'repeat was' if blocked == 1 else 'repeats were'} stopped "
        f"before the judge (no candidate spent). Designs closed for the task: "
        f"{escape(', '.join(closed)) if closed else 'none'}.</p>"
    )
    body = "".join(
        f"<tr><td class='design'><code>{escape(r.design or '(no header)')}</code></td>"
        f"<td>{escape(r.family or '-')}</td><td>{escape(r.error_kind)}</td>"
        f"<td class='num'>{r.failed}</td><td class='num'>{r.repeats}</td><td class='num'>{r.blocked}</td>"
        f"<td>{', '.join(f'<a class=ref href=#{escape(n)}>{escape(n)}</a>' for n in r.nodes)}</td></tr>"
        for r in rows
    )
    return (
        summary + "<table><tr><th>design</th><th>family</th><th>error kind</th><th>failed at the judge</th>"
        "<th>of them repeats</th><th>repeats blocked</th><th>attempts</th></tr>" + body + "</table>"
    )


def render_report(result: OptimizeResult, attempts: list[Attempt]) -> str:
    c = result.cost
    klass = (
        "good"
        if result.correct and result.slower_than_eager is False
        else ("bad" if not result.correct or result.slower_than_eager else "")
    )
    refs = context_refs(attempts)
    rows = []
    for a in sorted(attempts, key=lambda a: a.seq):
        first = (a.feedback or "").splitlines()[0] if a.feedback else ""
        cand = a.candidate
        header = (
            f"<code>{escape(cand.meta)}</code>"
            if cand.meta
            else f"<span class='muted'>no header; kernels:</span> <code>{escape(cand.design)}</code>"
        )
        answer = cand.answer or (
            f"(not recorded; {cand.answer_chars} characters)" if cand.answer_chars else ""
        )
        program = cand.code or "(none: " + (cand.error or "no program") + ")"
        learned = "; ".join(a.reflection.rule_texts)
        note = f" <span class='muted'>{escape(a.reflection.note)}</span>" if a.reflection.note else ""
        rows.append(
            f"<tr class='attempt' id='{escape(a.node_id)}'><td class='id'><b>{escape(a.node_id)}</b></td>"
            f"<td class='id'>{escape(a.parent)}</td><td class='id'>{escape(a.action)}</td>"
            f"<td class='status' style='color:{STATUS_COLOR.get(a.status, '#000')}'>{escape(a.status)}</td>"
            f"<td class='num'>{_fmt(a.timing.speedup_vs_eager, '.3f')}</td>"
            f"<td class='num'>{escape(versus_parent(a, attempts))}</td>"
            f"<td class='num'>{a.reward:.3f}</td><td class='design'>{header}</td></tr>"
            f"<tr class='detail'><td colspan='8'>"
            f"<pre class='feedback'>{escape(first[:400])}</pre>"
            f"{_details('full feedback', a.feedback or '') if (a.feedback or '').strip() != first[:400].strip() else ''}"
            f"{_details('model answer', answer)}"
            f"{_details('program taken from the answer', program, code=True)}"
            f"<div class='line'><span class='label'>rule learned</span>"
            f"{escape(learned) if learned else '<span class=muted>none</span>'}{note}</div>"
            f"<div class='line'><span class='label'>rules and cases in its prompt</span>"
            f"{prompt_list(a, refs)}</div></td></tr>"
        )
    kernel = Path(result.run_dir) / "kernel.py"
    kernel_link = (
        f"<p>Best kernel: <a href='kernel.py'><code>kernel.py</code></a> ({escape(str(kernel))})</p>"
        if result.best is not None
        else "<p class='muted'>No kernel.py: no correct kernel was found.</p>"
    )
    learned = "".join(f"<li>{escape(r)}</li>" for r in result.rules_learned) or "<li class='muted'>none</li>"
    # the verdict names the timing note where it explains an unknown speed: said once, not twice
    note = result.timing_note
    timing = f" {escape(note[:1].upper() + note[1:])}." if note and note not in result.verdict else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kernelwright: {escape(result.task)}</title>
<style>{CSS}</style></head><body>
<h1>kernelwright: {escape(result.task)}</h1>
<div class="muted">run {escape(result.run_id)} &middot; target {escape(result.target)} &middot; device {escape(result.device)}
 &middot; model {escape(result.model)} &middot; precision {escape(result.precision)} &middot; seed {result.seed}</div>
<div class="verdict {klass}">{escape(result.verdict)}</div>
<p>Stopped: {escape(result.stop_reason or "-")}.{timing}</p>
{kernel_link}
<table>
<tr><th>best speedup vs eager</th><td>{_fmt(result.best.speedup_vs_eager if result.best else None, ".3f")}</td>
<th>vs torch.compile</th><td>{_fmt(result.best.speedup_vs_compile if result.best else None, ".3f")}</td></tr>
<tr><th>LLM calls</th><td>{c.llm_calls}</td><th>tokens in / out</th><td>{c.tokens_in} / {c.tokens_out}</td></tr>
<tr><th>evaluations</th><td>{c.evaluations}</td><th>eval s / GPU s</th><td>{c.eval_s:.1f} / {c.gpu_s:.1f}</td></tr>
<tr><th>wall s</th><td>{c.wall_s:.1f}</td><th>roofline floor</th><td>{_fmt(result.roofline_floor_ms, ".4g", unit=" ms")}</td></tr>
</table>
<h2>Search tree</h2>{tree_svg(result)}
<h2>Speedup over attempts</h2>{progress_svg(result, attempts)}
<h2>Failures by design and kind</h2>{failures_section(attempts)}
<h2>Attempts</h2>
<table class="wide"><tr><th>node</th><th>parent</th><th>action</th><th>status</th><th>speedup</th><th>vs parent</th>
<th>reward</th><th>kernel</th></tr>{"".join(rows)}</table>
<h2>Rules and cases in context</h2>{_context_tables(attempts, refs)}
<h2>Rules learned in this run</h2><ul>{learned}</ul>
</body></html>
"""


def write_report(result: OptimizeResult, attempts: list[Attempt], path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(render_report(result, attempts), encoding="utf-8")
    return p
