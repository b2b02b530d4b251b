"""report.html as a person reads it: in headless Chromium at a laptop's width (1366 px).

An attempt's feedback and program get the page's width (they were once squeezed into a column a word and
25 characters wide), each rule and case in a prompt is named by a short reference and its words (not a raw
id), the injected table says why each was chosen, and the stop line does not repeat the verdict's timing
sentence. The screenshot is kept in the test's folder and its path printed (pytest -rP shows it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelwright.hardware.result import EvalResult
from kernelwright.nodes.records import (
    Attempt,
    Candidate,
    ContextItem,
    ContextRecord,
    OptimizeResult,
    Reflection,
    Timing,
)
from kernelwright.nodes.report import render_report
from tests import browser

WIDTH = 1366
NOTE = "timing is not meaningful on the CPU interpreter: kernels are ranked by correctness only"
FEEDBACK = (
    "compile_error: triton.compiler.errors.CompilationError: at 14:8: the block shape of tl.dot must be at "
    "least 16 in every dimension, got BLOCK_M=8, BLOCK_N=8, BLOCK_K=8; raise the tile sizes or leave the "
    "product to torch (the reference program's matmul) where the shapes are this small and odd."
)
LONG_LINE = "    acc = tl.dot(a_tile, b_tile, acc, input_precision='ieee', out_dtype=tl.float32)  # keep fp32 accumulate"
PROGRAM = (
    "# kernelwright: family=matmul design=tiled config=BLOCK_M=8\nimport triton\n" + LONG_LINE + "\n" * 3
)
RULE = ContextItem(kind="rule", id="rule-5f1c2a", tier="warm", text="You cannot use tl.dot with blocks below 16",
                   reason="seen 4 times; same op family; relevance 0.81")  # fmt: skip
CASE = ContextItem(kind="case", id="case-9b7e41d2", tier="warm",
                   text="row_registers for softmax (09_softmax) on cpu-interpreter: unmeasured",
                   reason="task 09_softmax, unmeasured; match 0.64")  # fmt: skip


def _attempt(seq: int, status: str, **kw: object) -> Attempt:
    return Attempt(
        seq=seq, node_id=f"n{seq}", parent="n0", action="large_step",
        candidate=Candidate(node_id=f"n{seq}", code=PROGRAM, meta=PROGRAM.splitlines()[0],
                            answer="I will tile the product.\n```python\n" + PROGRAM + "```"),
        result=EvalResult(correct=status == "correct"), status=status, timing=Timing(origin="none"), **kw,
    )  # fmt: skip


def _page(tmp_path: Path) -> Path:
    result = OptimizeResult(
        task="mm_odd", run_id="0" * 32, run_dir=str(tmp_path), correct=True,
        verdict=f"Found a correct Triton kernel (n2); its speed is unknown: {NOTE}.",
        timing_note=NOTE, stop_reason="candidate budget spent (2/2)", target="cpu-interpreter", device="cpu",
    )  # fmt: skip
    cut = ContextItem(
        kind="case", id="case-cut", tier="warm", text="flat for relu on cpu", reason="cases cap 2400"
    )
    attempts = [
        _attempt(1, "failed", feedback=FEEDBACK, context=ContextRecord(injected=[RULE], cut=[cut]),
                 reflection=Reflection(rule_texts=["You cannot use tl.dot with blocks below 16"])),
        _attempt(2, "correct", feedback="correct: matches the reference within tolerance",
                 context=ContextRecord(injected=[RULE, CASE])),
    ]  # fmt: skip
    page = tmp_path / "report.html"
    page.write_text(render_report(result, attempts), encoding="utf-8")
    return page


def _span(rows: list[bytes], colour: str) -> int:
    """Horizontal extent in pixels of the pixels near `colour` (a text painted in it)."""
    r0, g0, b0 = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    xs = [
        x // 3
        for row in rows
        for x in range(0, len(row), 3)
        if abs(row[x] - r0) + abs(row[x + 1] - g0) + abs(row[x + 2] - b0) <= 120
    ]
    return max(xs) - min(xs) if xs else 0


@pytest.mark.slow  # headless Chromium, ~4 s; tests/unit/test_bench.py renders the bench's page in the default suite
def test_the_run_report_reads_well_at_a_laptop_width(tmp_path: Path) -> None:
    browser.chromium()  # skips, saying why, without a browser
    page = _page(tmp_path)
    dom = browser.dump_dom(page)

    stopped = re.search(r"<p>Stopped: (.*?)</p>", dom, re.S)
    assert stopped and stopped.group(1) == "candidate budget spent (2/2)."  # the verdict says the timing
    assert dom.count(NOTE) == 1
    # The prompt of n2: its rule and case by short name and words; ids only in the tooltips and the table.
    prompts = re.findall(r'<ul class="prompt">(.*?)</ul>', dom, re.S)
    assert len(prompts) == 2
    assert ">R1</a> You cannot use tl.dot with blocks below 16" in prompts[1]
    assert ">C1</a> row_registers for softmax (09_softmax) on cpu-interpreter: unmeasured" in prompts[1]
    assert not re.search(r">[^<]*case-9b7e41d2", prompts[1])
    # The injected table says why each was chosen; the cut table why it was cut.
    injected = dom.split("<h3>Injected</h3>")[1].split("<h3>")[0]
    assert "seen 4 times; same op family; relevance 0.81" in injected and "match 0.64" in injected
    assert 'id="ctx-R1"' in injected and 'id="ctx-C1"' in injected and "<td>-</td>" not in injected
    assert "cases cap 2400" in dom.split("<h3>Cut for the token budget</h3>")[1]

    # Widths, measured: every block opened, the feedback and the program painted in colours of their own.
    html = (
        page.read_text()
        .replace("<details>", "<details open>")
        .replace("</style>", "pre.feedback{color:#00c000}pre.code{color:#ff00ff}</style>")
    )
    opened = tmp_path / "report-open.html"
    opened.write_text(html, encoding="utf-8")
    shot = tmp_path / "report-open.png"
    rows = browser.screenshot(opened, shot, WIDTH, 2400)
    print(f"screenshot of report.html at {WIDTH} px, every block open: {shot}")
    feedback_px, code_px = _span(rows, "#00c000"), _span(rows, "#ff00ff")
    # ~7 px a character at 12 px monospace: the feedback wraps at the page's width (>= 900 px), the
    # program's longest line (110 characters) is whole on one line (~790 px); a 25-character column is 180.
    assert feedback_px >= 900, feedback_px
    assert code_px >= 0.9 * len(LONG_LINE) * 6.5, code_px
