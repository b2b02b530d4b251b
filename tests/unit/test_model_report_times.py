"""The model report's times are the judge's: a region's share of the model's time is its torch time as its
search's judge measured it (found.json), times its places, over the model's eager time as the judge measured
it for the stitched model (stitched_eval.json); untimed regions say so. The files are written as the judge's
records (BestKernel, OptimizeResult, EvalResult) would be on a GPU."""

from __future__ import annotations

import html
import re
import types
from pathlib import Path

from kernelwright.graphs.model import ModelResult, RegionRow
from kernelwright.hardware.result import EvalResult
from kernelwright.nodes.model_report import render_model_report
from kernelwright.nodes.records import BestKernel, OptimizeResult
from kernelwright.tasks.regions import split_model
from tests.kernels.tiny_model_src import TINY_MODEL


def _text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _row(page: str, sig: str) -> str:
    return _text(page.split(f"<tr id='region-{sig}'>")[1].split("</tr>")[0])


def test_shares_come_from_the_judges_times(tmp_path: Path) -> None:
    tiny = types.ModuleType("tiny_report")
    exec(compile(TINY_MODEL, "<tiny>", "exec"), tiny.__dict__)
    split = split_model(tiny.Model(*tiny.get_init_inputs()), tiny.get_inputs())
    groups = list(split.unique().items())
    (stem_sig, _), (block_sig, blocks), (head_sig, _), (fc_sig, _) = groups
    assert len(blocks) == 2
    rows = []
    for sig, regions in groups[:3]:
        run_dir = tmp_path / "regions" / sig
        run_dir.mkdir(parents=True)
        rows.append(RegionRow(signature=sig, regions=[r.index for r in regions], ops=regions[0].ops,
                              status="searched", correct=True, evaluations=4, run_dir=str(run_dir)))  # fmt: skip
    timed = {stem_sig: (0.25, 0.1), block_sig: (0.15, 0.1)}  # the head's search ran where nothing was timed
    for row in rows:
        eager, kernel = timed.get(row.signature, (None, None))
        best = BestKernel(node_id="n1", code="", speedup_vs_eager=eager / kernel if eager else None,
                          runtime_ms=kernel, eager_ms=eager, timing_origin="measured" if eager else "none")  # fmt: skip
        row.speedup = best.speedup_vs_eager
        found = OptimizeResult(task=row.signature, run_id="r", run_dir=row.run_dir, correct=True, verdict="",
                               best=best, timing_meaningful=eager is not None)  # fmt: skip
        (Path(row.run_dir) / "found.json").write_text(found.model_dump_json(), encoding="utf-8")
    (tmp_path / "regions" / stem_sig / "report.html").write_text("<html></html>", encoding="utf-8")
    page = render_model_report(tmp_path, "tiny", split, rows, 12, line="region [3]: searched")
    # the region's own search report is linked from its row, only where there is one
    assert f"href='regions/{stem_sig}/report.html'" in page and f"regions/{head_sig}/report.html" not in page
    assert "model not timed yet" in _row(page, stem_sig) and "Running: 3 of 4" in _text(page)
    assert "waiting" in _row(page, fc_sig)
    verdict = EvalResult(correct=True, timing_meaningful=True, eager_ms=1.0, runtime_ms=0.8)
    (tmp_path / "stitched_eval.json").write_text(verdict.model_dump_json(), encoding="utf-8")
    result = ModelResult(model="tiny", run_dir=str(tmp_path), regions=5, signatures=4, regions_with_kernel=4,
                         evaluations=12, split_s=0.1, rows=rows, correct=True, speedup=1.25, verdict="correct")  # fmt: skip
    page = render_model_report(tmp_path, "tiny", split, rows, 12, result=result)
    stem, block, head = _row(page, stem_sig), _row(page, block_sig), _row(page, head_sig)
    assert "2.50x 0.25 ms 25.0%" in stem
    assert block.split()[1] == "2" and "1.50x 0.15 ms 30.0%" in block  # two places: twice its time
    assert "correct, not timed not timed not timed" in head
    text = _text(page)
    assert (
        "best region speedup so far 2.50x" in text
        and "whole model (judge) eager 1 ms, stitched 0.8 ms" in text
    )
    assert "Finished: 4/5 regions run a kernel. Stitched model: correct" in text


def test_a_stitched_model_slower_than_eager_says_keep_the_reference() -> None:
    """The judge's verdict on a whole model, as it reads on a GPU: correct and timed slower than eager (level 3's
    LSTMs were, their recurrence kept in torch) says plainly that the reference model is the answer; faster, it
    does not; untimed (the CPU), it makes no claim either way; wrong, the judge's error is the verdict."""
    from kernelwright.graphs.model import take_verdict

    def verdict(**fields: object) -> ModelResult:
        result = ModelResult(model="m", run_dir="r", regions=3, signatures=2, regions_with_kernel=2,
                             evaluations=4, split_s=0.1)  # fmt: skip
        take_verdict(result, EvalResult(**fields))  # type: ignore[arg-type]
        return result

    timed = {
        "correct": True,
        "stage": "done",
        "runtime_ms": 61.8,
        "eager_ms": 37.6,
        "timing_meaningful": True,
    }
    slow = verdict(**timed, speedup_vs_eager=0.61)
    assert slow.correct and slow.slower_than_eager is True and slow.speedup == 0.61
    assert "SLOWER than eager PyTorch (0.61x): keep the reference model" in slow.verdict
    fast = verdict(**{**timed, "runtime_ms": 20.0}, speedup_vs_eager=1.88)
    assert (
        fast.slower_than_eager is False and "SLOWER" not in fast.verdict and "1.88x vs eager" in fast.verdict
    )
    untimed = verdict(correct=True, stage="done")
    assert untimed.speedup is None and untimed.slower_than_eager is None and "SLOWER" not in untimed.verdict
    wrong = verdict(correct=False, stage="correctness", error_kind="mismatch", error="3 of 9 elements differ")
    assert (
        wrong.correct is False
        and wrong.slower_than_eager is None
        and wrong.verdict == "3 of 9 elements differ"
    )
