"""The bench's parts that need no worker: aggregates and fast_p (checked against numbers worked out by
hand), task discovery, --gpus and the workers it gives, the task ledger, and the HTML report rendered in
headless Chromium (the plots drawn, the tables there, nothing loaded from elsewhere)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernelwright.bench.coordinator import parse_gpus, plan_slots
from kernelwright.bench.folder import LEDGER_FILE, BenchError, append_ledger, discover, read_ledger
from kernelwright.bench.render import COMPILE_COLOR, EAGER_COLOR, write_suite
from kernelwright.bench.report import P_GRID, TaskRow, build_suite, primary_family
from tests import browser

TIMED = {"timing_meaningful": True}


def row(ident: str, status: str = "pending", family: str = "other", **kw) -> TaskRow:
    suite, task = ident.split("/")
    return TaskRow(
        id=ident, suite=suite, task=task, path=f"/x/{task}.py", status=status, family=family, families=[family],
        correct=status == "correct", run_dir=f"runs/{ident}", **kw,
    )  # fmt: skip


def sample_rows() -> list[TaskRow]:
    return [
        row("level1/a", "correct", "matmul", speedup_vs_eager=2.0, speedup_vs_compile=1.5, fraction_of_floor=0.8,
            evaluations=4, wall_s=10, gpu_s=5, runtime_ms=0.417, runtime_p20_ms=0.267, runtime_p80_ms=0.506,
            **TIMED),
        row("level1/b", "correct", "norm", speedup_vs_eager=0.5, fraction_of_floor=0.4, evaluations=3,
            runtime_ms=1.5, **TIMED),
        row("level2/c", "incorrect", "conv", evaluations=4, **TIMED),
        row("level2/d", "harness_error", "conv", evaluations=1, **TIMED),
        row("level2/e"),
    ]  # fmt: skip


def fp(curve: list[float] | None, p: float) -> float:
    assert curve is not None
    return curve[P_GRID.index(p)]


def test_aggregates_and_fast_p_match_the_definitions():
    suite = build_suite(sample_rows(), {"out": "/b"})
    o = suite.overall
    assert (o.tasks, o.total, o.correct, o.failed) == (4, 5, 2, 1)
    assert o.correct_share == 0.5 and (o.faster_than_eager, o.faster_than_compile) == (1, 1)
    assert o.geomean_vs_eager.value == pytest.approx(1.0) and o.geomean_vs_eager.n == 2  # sqrt(2 * 0.5)
    assert o.geomean_vs_compile.value == pytest.approx(1.5) and o.geomean_vs_compile.n == 1
    assert o.mean_fraction_of_floor.value == pytest.approx(0.6) and o.mean_fraction_of_floor.n == 2
    assert (o.evaluations, o.wall_s, o.gpu_s) == (12, 10, 5)
    # fast_p: over all 4 finished tasks, strictly faster than p
    f = o.fast_p
    assert (f.tasks, f.measured_eager, f.measured_compile) == (4, 2, 1)
    assert [fp(f.vs_eager, p) for p in (0.0, 0.45, 0.5, 1.0, 1.95, 2.0, 3.0)] == [
        0.5,
        0.5,
        0.25,
        0.25,
        0.25,
        0,
        0,
    ]
    assert [fp(f.vs_compile, p) for p in (0.0, 1.45, 1.5)] == [0.25, 0.25, 0]
    assert len(f.p) == 61 and f.p[0] == 0 and f.p[-1] == 3
    # per folder and per family (the pending task is in no family yet); conv: timed, nothing correct -> zeros
    assert [(a.name, a.tasks, a.total, a.correct) for a in suite.suites] == [
        ("level1", 2, 2, 2),
        ("level2", 2, 3, 0),
    ]
    assert [a.name for a in suite.families] == ["conv", "matmul", "norm"]
    conv = suite.families[0]
    assert conv.fast_p.vs_eager == [0.0] * 61 and conv.geomean_vs_eager.n == 0 and conv.correct_share == 0
    # norm: timed against eager but with no torch.compile baseline: no compile curve rather than zeros
    norm = suite.families[2]
    assert fp(norm.fast_p.vs_eager, 0.0) == 1.0 and norm.fast_p.vs_compile is None
    b = suite.bench
    assert (b["tasks_total"], b["tasks_finished"], b["finished"], b["timing_meaningful"]) == (
        5,
        4,
        False,
        True,
    )


def test_untimed_tasks_have_no_curves_and_say_why():
    rows = [row("s/a", "correct", "pointwise"), row("s/b", "incorrect", "pointwise")]
    suite = build_suite(rows, {})
    assert suite.overall.fast_p.vs_eager is None and suite.overall.fast_p.vs_compile is None
    assert suite.overall.correct_share == 0.5 and suite.bench["finished"] is True
    assert "not meaningful" in suite.bench["timing_note"]


def test_primary_family_is_the_heaviest_op():
    assert primary_family(["pointwise", "conv", "norm"]) == "conv"
    assert primary_family(["reduction", "softmax"]) == "softmax"
    assert primary_family(["pointwise", "matmul"]) == "matmul"
    assert primary_family([]) == "other"


def test_discover_orders_like_kernelbench_and_names_suites_by_folder(tmp_path):
    a, b = tmp_path / "x" / "level1", tmp_path / "y" / "level1"
    for folder, names in ((a, ["10_b.py", "2_a.py", "1_c.py", "_helper.py", "notes.txt"]), (b, ["1_d.py"])):
        folder.mkdir(parents=True)
        for n in names:
            (folder / n).write_text("")
    tasks = discover([str(a), str(b), str(a / "2_a.py")])
    assert [t.id for t in tasks] == ["level1/1_c", "level1/2_a", "level1/10_b", "level1-2/1_d"]
    assert all(Path(t.path).is_absolute() for t in tasks)
    for bad, message in (
        ([str(tmp_path / "nope")], "no such folder or task file"),
        ([str(tmp_path / "x")], "no task files (*.py) in this folder"),
        ([str(a / "notes.txt")], "not a folder or a task file"),
    ):
        with pytest.raises(BenchError, match=re.escape(message)):
            discover(bad)


def test_gpus_flag_and_the_workers_it_starts(monkeypatch):
    import torch

    assert parse_gpus("all") is None and parse_gpus(" 1,0 ") == [1, 0]
    for bad in ("", "x", "-1", "0,0", "0;1"):
        with pytest.raises(ValueError):
            parse_gpus(bad)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    # torch's index i is the i-th GPU of the parent's CUDA_VISIBLE_DEVICES: worker i sees that GPU alone
    assert [(s.label, s.visible) for s in plan_slots(None, "auto")] == [("gpu 0", "3"), ("gpu 1", "5")]
    assert [(s.label, s.visible) for s in plan_slots([1], "cuda")] == [("gpu 1", "5")]
    with pytest.raises(BenchError, match=r"there is no GPU 2; 2 visible \(0-1\)"):
        plan_slots([2], "auto")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert [s.visible for s in plan_slots(None, "auto")] == ["0", "1"]
    assert [(s.label, s.visible) for s in plan_slots(None, "cpu")] == [("cpu", "")]
    with pytest.raises(BenchError, match="--device cpu"):
        plan_slots([0], "cpu")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert [s.label for s in plan_slots(None, "auto")] == ["cpu"]
    with pytest.raises(BenchError, match="no GPU is visible"):
        plan_slots(None, "cuda")
    with pytest.raises(BenchError, match="no GPU is visible"):
        plan_slots([0], "auto")


def test_ledger_keeps_the_latest_row_and_ignores_a_line_cut_short(tmp_path):
    append_ledger(tmp_path, row("s/a", "error", error="worker died"))
    append_ledger(tmp_path, row("s/b", "correct"))
    append_ledger(tmp_path, row("s/a", "correct"))
    with open(tmp_path / LEDGER_FILE, "a") as f:
        f.write(row("s/c", "correct").model_dump_json()[:40])  # a crash mid-write
    rows = read_ledger(tmp_path)
    assert {k: r.status for k, r in rows.items()} == {"s/a": "correct", "s/b": "correct"}


# -- the HTML report in a real browser --------------------------------------------------------------------


def _only(page: Path, figure: str, out: Path) -> Path:
    """A copy of the page showing one figure alone, at the top left (the page itself is unchanged)."""
    style = (
        "<style>body{margin:0;padding:0} body>*:not(.plots){display:none} "
        f".plots>*:not(#{figure}){{display:none}} figcaption{{display:none}} .plots{{gap:0}}</style>"
    )
    out.write_text(page.read_text().replace("</head>", style + "</head>", 1))
    return out


def test_html_report_renders_in_chromium_with_its_plots(tmp_path):
    browser.chromium()  # skips, saying why, without a browser
    write_suite(build_suite(sample_rows(), {"out": str(tmp_path)}), tmp_path)
    page = tmp_path / "suite.html"
    html = page.read_text()
    # self-contained: no script, stylesheet, image or font from anywhere
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(|src=", html, re.I)
    assert not re.search(r"href=['\"]?(https?:|//)", html)

    dom = browser.dump_dom(page)
    overall = re.search(r'<svg[^>]*id="fastp-overall".*?</svg>', dom, re.S)
    assert overall, "the fast_p plot is missing from the DOM"
    assert 'class="curve curve-eager"' in overall.group(0) and 'class="curve curve-compile"' in overall.group(
        0
    )
    hist = re.search(r'<svg[^>]*id="speedup-histogram".*?</svg>', dom, re.S)
    assert hist, "the histogram is missing from the DOM"
    # 2.0x and 0.5x vs eager, 1.5x vs compile: three bars, in these bins
    bars = re.findall(r"<title>(1 task\(s\) at [^<]+)</title>", hist.group(0))
    assert sorted(bars) == ["1 task(s) at 0.5-0.8x vs eager", "1 task(s) at 1.5-2x vs torch.compile",
                            "1 task(s) at 2-3x vs eager"]  # fmt: skip
    assert len(re.findall(r'id="fastp-family-\d+"', dom)) == 3  # conv, matmul, norm
    tasks = re.findall(r"<tr class=\"task\" data-task=\"([^\"]+)\">(.*?)</tr>", dom, re.S)
    assert [t for t, _ in tasks] == ["level1/a", "level1/b", "level2/c", "level2/d", "level2/e"]
    statuses = [re.search(r"class=\"st-\w+\">([^<]+)<", body).group(1) for _, body in tasks]  # type: ignore[union-attr]
    assert statuses == ["correct", "correct", "no kernel", "harness error", "not run yet"]
    assert "4/5 tasks finished, correct 2/4" in dom and "Partial: continue with" in dom

    # drawn: each plot alone in a screenshot shows both baselines' colours
    shot = browser.screenshot(
        _only(page, "fig-fastp", tmp_path / "fastp.html"), tmp_path / "fastp.png", 480, 320
    )
    assert browser.count_colour(shot, EAGER_COLOR) > 150 and browser.count_colour(shot, COMPILE_COLOR) > 150
    shot = browser.screenshot(_only(page, "fig-histogram", tmp_path / "h.html"), tmp_path / "h.png", 540, 320)
    eager_px, compile_px = browser.count_colour(shot, EAGER_COLOR), browser.count_colour(shot, COMPILE_COLOR)
    assert eager_px > 1.8 * compile_px > 1800, (eager_px, compile_px)  # two full-height bars against one
    blank = browser.screenshot(
        _only(page, "no-such-figure", tmp_path / "b.html"), tmp_path / "b.png", 480, 320
    )
    assert browser.count_colour(blank, EAGER_COLOR) == 0  # the counts above come from the plots


def test_json_and_markdown_hold_the_same_numbers(tmp_path):
    write_suite(build_suite(sample_rows(), {"out": str(tmp_path)}), tmp_path)
    data = json.loads((tmp_path / "suite.json").read_text())
    assert set(data) == {"schema_version", "bench", "overall", "suites", "families", "tasks"}
    assert data["overall"]["fast_p"]["vs_eager"][P_GRID.index(1.0)] == 0.25
    assert [t["status"] for t in data["tasks"]] == [
        "correct",
        "correct",
        "incorrect",
        "harness_error",
        "pending",
    ]
    md = (tmp_path / "suite.md").read_text()
    assert (
        "| overall | 4/5 | 2 (50%) | 1 | 1.00x (n=2) | 1.50x (n=1) | 50% / 25% / 0% | 25% / 25% / 0% |" in md
    )
    assert "| level2/d | conv | harness error |" in md
    # the best kernel's time with its spread (a host-bound forward shows as a wide one)
    assert "| level1/a | matmul | correct | 2.00x | 1.50x | 0.417 (0.267-0.506) | 80% |" in md
    assert "| level1/b | norm | correct | 0.50x | - | 1.5 | 40% |" in md
    assert data["tasks"][0]["runtime_p20_ms"] == 0.267


def test_evaluations_to_best_is_the_best_candidates_place_and_sums_over_correct_tasks():
    from kernelwright.bench.report import aggregate
    from kernelwright.bench.worker import evaluations_to_best

    nodes = [{"id": "n0", "action": None}] + [{"id": f"n{i}", "action": "small_step"} for i in (1, 2, 10, 3)]
    assert evaluations_to_best({"best": "n3", "nodes_detail": nodes}) == 3  # made n1, n2, n3, n10
    assert evaluations_to_best({"best": "n10", "nodes_detail": nodes}) == 4
    assert evaluations_to_best({"best": None, "nodes_detail": nodes}) is None
    rows = [row("s/a", "correct", evaluations=5, evaluations_to_best=2),
            row("s/b", "correct", evaluations=4, evaluations_to_best=4),
            row("s/c", "incorrect", evaluations=6)]  # fmt: skip
    assert aggregate("s", rows).evaluations_to_best == 6


def test_unseen_sizes_and_repeated_failures_are_counted_per_task_and_per_group(tmp_path):
    unseen_ok = [{"sizes": {"n": 11}, "correct": True}, {"sizes": {"n": 21}, "correct": True}]
    unseen_bad = [{"sizes": {"n": 11}, "correct": False, "error_kind": "shape_mismatch"},
                  {"sizes": {"n": 21}, "correct": True}]  # fmt: skip
    rows = [
        row("s/a", "correct", speedup_vs_eager=2.0, unseen=unseen_ok, holds_unseen=True,
            unseen_speedup_vs_eager=1.6, unseen_vs_searched=0.8, candidates=8,
            failed_by_kind={"compile_error": 2}, repeats=1, blocked=3, **TIMED),
        row("s/b", "correct", speedup_vs_eager=1.0, unseen=unseen_bad, holds_unseen=False,
            unseen_vs_searched=0.5, candidates=8, failed_by_kind={"compile_error": 1, "mismatch": 1}, **TIMED),
        row("s/c", "correct", speedup_vs_eager=1.0, candidates=4, unseen_note="no size constant of 8 or more"),
        row("s/d", "incorrect", candidates=4, failed_by_kind={"runtime_error": 4}, repeats=1),
    ]  # fmt: skip
    o = build_suite(rows, {}).overall
    assert (o.unseen_checked, o.holds_unseen, o.holds_unseen_share) == (2, 1, 0.5)
    # only a kernel that holds counts in the unseen/searched geomean
    assert o.geomean_unseen_vs_searched.value == pytest.approx(0.8) and o.geomean_unseen_vs_searched.n == 1
    assert (o.candidates, o.repeats, o.blocked) == (24, 2, 3)
    assert o.repeats_per_100 == pytest.approx(100 * 2 / 24)
    assert o.failed_by_kind == {"compile_error": 3, "mismatch": 1, "runtime_error": 4}
    write_suite(build_suite(rows, {"out": str(tmp_path)}), tmp_path)
    md = (tmp_path / "suite.md").read_text()
    assert "- overall: 2/2 best kernels hold" not in md
    assert (
        "- overall: 1/2 best kernels hold at unseen sizes (50%)" in md
        and "2 repeated failure(s) judged of 24" in md
    )
    assert "| s/a | holds at 2 unseen size(s) | 1.60x | 0.80x | n=11; n=21 | compile_error 2 | 1 | 3 |" in md
    assert "| s/b | does not hold (1 of 2: shape_mismatch) |" in md
    assert "| s/c | no size constant of 8 or more |" in md
    data = json.loads((tmp_path / "suite.json").read_text())
    assert data["overall"]["repeats_per_100"] == pytest.approx(8.333, abs=1e-3)
    assert data["tasks"][1]["holds_unseen"] is False
