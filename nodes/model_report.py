"""report.html for one whole-model run (`kernelwright optimize-model`, graphs/model.py): one
self-contained page, no scripts, no network, rewritten as the model's regions finish.

It shows the run's progress (region signatures done / total, evaluations, best region speedup so far; a
page open in a browser reloads itself while the run is going), the stitched model's verdict once it was
judged, and the region table: per region signature its operators, the shapes it was cut at, the places in
the model that use it, its status (searched, reused from memory, kept in torch; being searched, waiting,
or not reached when the run stopped early), its best speedup, and its share of the model's time. Times are only the judge's: a region's torch time as
its search's judge measured it (regions/<signature>/found.json) against the model's own, as the judge
measured it for the stitched model (stitched_eval.json). Where the judge did not time (the CPU), the page
says "not timed"; it never estimates.

A run that stops with an error (`written_on_crash` around the run) still leaves the page, with the
regions done until then and the error.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path
from typing import Any, TypeVar

from kernelwright.nodes.report import CSS

REPORT = "report.html"
REFRESH_S = 10
"""How often a page open while the run goes on reloads itself."""

STATUS_NAMES = {"from memory": "reused from memory"}
STATUS_COLOR = {
    "searched": "#2f9e44",
    "reused from memory": "#1c7ed6",
    "kept in torch": "#868e96",
    "being searched": "#f08c00",
    "waiting": "#adb5bd",
    "not reached": "#e03131",
}

MODEL_CSS = """
.bar{background:#e9ecef;border-radius:4px;height:10px;width:320px;display:inline-block;vertical-align:middle}
.bar span{display:block;height:10px;border-radius:4px;background:#2f9e44}
td.ops code{overflow-wrap:anywhere} td.shapes{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
"""

_last = threading.local()
"""The arguments of this thread's latest page of the run in progress (`written_on_crash` redraws it)."""


def _fmt_ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g} ms"


def _shape(value: Any) -> str:
    if value is None:
        return "?"
    if not getattr(value, "tensor", False):
        return "scalar"
    dtype = str(getattr(value, "dtype", "")).removeprefix("torch.")
    return f"{dtype}[{', '.join(map(str, value.shape))}]"


def region_shapes(split: Any, index: int) -> str:
    """`float32[2, 6, 7, 9] -> float32[2, 6, 7, 9]`: a region's inputs and outputs as cut."""
    region = next((r for r in split.regions if r.index == index), None)
    if region is None:
        return ""
    ins = ", ".join(_shape(split.values.get(n)) for n in region.inputs)
    outs = ", ".join(_shape(split.values.get(n)) for n in region.outputs)
    return f"{ins or '()'} -> {outs or '()'}"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def region_timing(run_dir: str) -> dict[str, float | None]:
    """The judge's times of a searched region (its torch time and its best kernel's), {} when untimed."""
    found = _read_json(Path(run_dir) / "found.json") if run_dir else None
    best = (found or {}).get("best") or {}
    if not (found or {}).get("timing_meaningful") or best.get("timing_origin") != "measured":
        return {}
    return {"eager_ms": best.get("eager_ms"), "kernel_ms": best.get("runtime_ms")}


def model_timing(run_dir: Path) -> dict[str, float | None]:
    """The judge's times of the stitched model (stitched_eval.json), {} when it was not timed."""
    verdict = _read_json(run_dir / "stitched_eval.json") or {}
    if not verdict.get("timing_meaningful") or verdict.get("eager_ms") is None:
        return {}
    return {"eager_ms": verdict.get("eager_ms"), "runtime_ms": verdict.get("runtime_ms")}


def _row_dict(row: Any) -> dict[str, Any]:
    return row.model_dump() if hasattr(row, "model_dump") else dict(row)


def render_model_report(
    run_dir: Path,
    name: str,
    split: Any,
    rows: Sequence[Any],
    evaluations: int,
    *,
    line: str = "",
    result: Any = None,
    error: str | None = None,
) -> str:
    """The page. `split` is the model's split (tasks.regions.ModelSplit), `rows` the region signatures done
    so far (graphs.model.RegionRow), `result` the finished run (graphs.model.ModelResult, None while it
    runs), `error` why the run stopped early."""
    done = [_row_dict(r) for r in rows]
    groups = split.unique()
    total = len(groups)
    done_sigs = {r["signature"] for r in done}
    waiting = [(sig, regions) for sig, regions in groups.items() if sig not in done_sigs]
    searching = bool(waiting) and error is None and result is None and line.endswith("searching")
    model_t = model_timing(run_dir)
    speeds = [r["speedup"] for r in done if r.get("speedup") is not None]
    best = max(speeds) if speeds else None
    running = result is None and error is None

    table = []
    for r in done:
        status = STATUS_NAMES.get(r["status"], r["status"])
        t = region_timing(r.get("run_dir", ""))
        places = len(r["regions"])
        eager = t.get("eager_ms")
        if eager is None:
            share = "not timed"
        elif model_t:
            share = f"{100 * places * eager / float(model_t['eager_ms'] or 1.0):.1f}%"
        else:
            share = "model not timed yet" if running else "model not timed"
        if r.get("speedup") is not None:
            speed = f"{r['speedup']:.2f}x"
        elif r.get("correct") and status != "kept in torch":
            speed = "correct, not timed"
        else:
            speed = "-"
        torch_time = _fmt_ms(eager) if eager is not None else "not timed"
        work = str(r.get("evaluations", 0))
        if r.get("search_s") is not None:  # the search's wall time in this run
            work += f" in {r['search_s']:.1f} s"
        table.append(_table_row(run_dir, r["signature"], r["regions"], r["ops"], region_shapes(split, r["regions"][0]),
                                status, r.get("note", ""), work, speed, torch_time, share))  # fmt: skip
    for i, (sig, regions) in enumerate(waiting):
        status = "being searched" if searching and i == 0 else "waiting"
        if error is not None:
            status = "not reached"
        idx = [reg.index for reg in regions]
        table.append(_table_row(run_dir, sig, idx, regions[0].ops, region_shapes(split, idx[0]), status, "", "0",
                                "-", "-", "-"))  # fmt: skip

    if error is not None:
        state, klass = f"Stopped with an error after {len(done)} of {total} region signatures: {error}", "bad"
    elif result is None:
        state, klass = (
            f"Running: {len(done)} of {total} region signatures done"
            + (" (stitching and judging the whole model)" if not waiting else ""),
            "",
        )
    else:
        verdict = getattr(result, "verdict", "") or "not judged"
        state = f"Finished: {getattr(result, 'regions_with_kernel', 0)}/{len(split.regions)} regions run a kernel. Stitched model: {verdict}"  # fmt: skip
        correct = getattr(result, "correct", None)
        klass = "good" if correct else ("bad" if correct is False else "")
    pct = 100 * len(done) / max(1, total)
    refresh = f'<meta http-equiv="refresh" content="{REFRESH_S}">' if running else ""
    stitched = (run_dir / "stitched.py").is_file()
    model_line = (
        f"eager {_fmt_ms(model_t.get('eager_ms'))}, stitched {_fmt_ms(model_t.get('runtime_ms'))}"
        if model_t
        else "not timed"
    )
    legend = "".join(f"<span><b style='color:{c}'>{escape(s)}</b></span>" for s, c in STATUS_COLOR.items())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">{refresh}<title>kernelwright model: {escape(name)}</title>
<style>{CSS}{MODEL_CSS}</style></head><body>
<h1>kernelwright model: {escape(name)}</h1>
<div class="muted">run folder {escape(str(run_dir))} &middot; {len(split.regions)} regions, {total} signatures
 &middot; split in {float(getattr(split, "seconds", 0.0)):.2f} s</div>
<div class="verdict {klass}">{escape(state)}</div>
<h2>Progress</h2>
<table>
<tr><th>region signatures done</th><td>{len(done)} / {total} <span class="bar"><span style="width:{pct:.0f}%"></span></span></td></tr>
<tr><th>evaluations</th><td>{evaluations}</td></tr>
<tr><th>best region speedup so far</th><td>{f"{best:.2f}x" if best is not None else "not timed"}</td></tr>
<tr><th>latest</th><td>{escape(line or "-")}</td></tr>
<tr><th>whole model (judge)</th><td>{escape(model_line)}</td></tr>
</table>
<p>{"<a href='stitched.py'><code>stitched.py</code></a>: the model with its regions' kernels (<code>kernelwright eval model.py stitched.py</code> judges it again)." if stitched else "<span class='muted'>No stitched model yet.</span>"}
Each region's task is <code>regions/region_&lt;signature&gt;.py</code>, its search in <code>regions/&lt;signature&gt;/</code>.</p>
<h2>Regions</h2>
<p class="legend">{legend}</p>
<table class="wide"><tr><th>signature</th><th>places</th><th>operators</th><th>shapes (in -> out)</th><th>status</th>
<th>best speedup</th><th>torch time (judge)</th><th>share of the model's time</th><th>evaluations (search time)</th><th>note</th></tr>
{"".join(table)}</table>
<p class="muted">Share of the model's time: the region's torch time, as its search's judge measured it, times
the places that use it, over the whole model's eager time as the judge measured it. "not timed": the judge did
not time it (on the CPU interpreter timing is not meaningful).</p>
</body></html>
"""


def _table_row(run_dir: Path, sig: str, regions: list[int], ops: list[str], shapes: str, status: str,
               note: str, evaluations: str, speed: str, torch_time: str, share: str) -> str:  # fmt: skip
    color = STATUS_COLOR.get(status, "#212529")
    name = f"<code>{escape(sig[:12])}</code>"
    if (run_dir / "regions" / f"region_{sig}.py").is_file():  # the region's task, to read or run alone
        name = f"<a href='regions/region_{escape(sig)}.py' title='{escape(sig)}'>{name}</a>"
    search = ""
    if (run_dir / "regions" / sig / "report.html").is_file():  # the region's own search, attempt by attempt
        search = f"<br><a href='regions/{escape(sig)}/report.html'>its search</a>"
    return (
        f"<tr id='region-{escape(sig)}'><td class='id'>{name}</td>"
        f"<td class='num' title='regions {escape(', '.join(map(str, regions)))}'>{len(regions)}</td>"
        f"<td class='ops'><code>{escape(' + '.join(ops))}</code></td><td class='shapes'>{escape(shapes)}</td>"
        f"<td><span style='color:{color};font-weight:600'>{escape(status)}</span>{search}</td>"
        f"<td class='num'>{escape(speed)}</td>"
        f"<td class='num'>{escape(torch_time)}</td><td class='num'>{escape(share)}</td>"
        f"<td class='num'>{evaluations}</td><td>{escape(note)}</td></tr>"
    )


def write_model_report(
    run_dir: Path,
    name: str,
    split: Any,
    rows: Sequence[Any],
    evaluations: int,
    *,
    line: str = "",
    result: Any = None,
    error: str | None = None,
) -> Path:
    """Write (replace) report.html in the run folder; a reader never sees half a page."""
    _last.args = (run_dir, name, split, list(rows), evaluations, line)
    page = render_model_report(run_dir, name, split, rows, evaluations, line=line, result=result, error=error)
    path = Path(run_dir) / REPORT
    tmp = path.with_name(f".{REPORT}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, path)
    return path


F = TypeVar("F", bound=Callable[..., Any])


def written_on_crash(fn: F) -> F:
    """Around a model run: when it raises after its first page, the page is written once more with the
    regions done so far and the error, then the error goes on."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        _last.args = None
        try:
            return fn(*args, **kwargs)
        except BaseException as exc:
            last = getattr(_last, "args", None)
            if last is not None:
                run_dir, name, split, rows, evaluations, line = last
                first = str(exc).splitlines()[0] if str(exc) else ""
                try:
                    write_model_report(run_dir, name, split, rows, evaluations, line=line,
                                       error=f"{type(exc).__name__}: {first}"[:400])  # fmt: skip
                except OSError:
                    pass  # the run's own error is the one to report
            raise
        finally:
            _last.args = None

    return run  # type: ignore[return-value]
