"""Writing a whole model's first programs (benchmarks/level3_first_programs.py `write`): the writer analyses each
region signature once (two make_fx traces, at its sizes and at others, in the process that writes it), and
the stitched file is the same whether one process writes every signature or several forked processes share
them."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest
from torch.fx.experimental import proxy_tensor

from kernelwright.providers.offline.frontend import analysis
from kernelwright.tasks.regions import analysis_model, split_model

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

# Two layers alike (one signature), a third of another width, a concatenation of their outputs and a head:
# four regions, three signatures.
_MODEL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Linear(24, 24), nn.LayerNorm(24), nn.GELU())
        self.b = nn.Sequential(nn.Linear(24, 24), nn.LayerNorm(24), nn.GELU())
        self.c = nn.Sequential(nn.Linear(24, 40), nn.LayerNorm(40), nn.GELU())
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        y = self.b(self.a(x))
        return torch.softmax(self.head(torch.cat([y, self.c(y)], 1)), dim=1)


def get_inputs():
    return [torch.randn(6, 24)]


def get_init_inputs():
    return []
"""


def _bench() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        "kw_bench_level3_first_programs", BENCHMARKS / "level3_first_programs.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # forked workers find _first_program by its module's name
    spec.loader.exec_module(mod)
    return mod


def _write(
    bench: types.ModuleType, path: Path, out: Path, region_jobs: int, capsys: pytest.CaptureFixture
) -> dict:
    out.mkdir()
    analysis._CACHE.clear()
    bench._write_one(str(path), str(out), region_jobs)
    rows = [ln[4:] for ln in capsys.readouterr().out.splitlines() if ln.startswith("ROW ")]
    return json.loads(rows[-1])


def test_each_signature_is_traced_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    path = tmp_path / "tiny.py"
    path.write_text(_MODEL)
    task = types.ModuleType("tiny")
    exec(compile(_MODEL, str(path), "exec"), task.__dict__)
    split = split_model(*analysis_model(task), measure=False)
    assert len(split.regions) > len(split.unique())  # the two layers alike share a signature

    traces: list[object] = []
    make_fx = proxy_tensor.make_fx
    monkeypatch.setattr(proxy_tensor, "make_fx", lambda *a, **k: traces.append(a[0]) or make_fx(*a, **k))
    analysed: list[str] = []
    analyze_source = analysis.analyze_source
    monkeypatch.setattr(
        analysis, "analyze_source", lambda s, n="task": analysed.append(s) or analyze_source(s, n)
    )
    row = _write(_bench(), path, tmp_path / "one", 1, capsys)
    assert row["signatures"] == len(split.unique()) and row["with_kernel"] == len(split.regions)
    assert len(analysed) == len(set(analysed)) <= row["signatures"]  # a signature is analysed once
    # ... and traced twice: at its sizes, and with its modules' sizes (get_init_inputs) varied, which the
    # judge also builds it at; no other trace (not one of get_inputs' literal sizes varied)
    assert len(traces) == 2 * len(analysed)


def test_forked_writers_stitch_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    path = tmp_path / "tiny.py"
    path.write_text(_MODEL)
    bench = _bench()
    monkeypatch.setattr(bench, "SIGNATURES_PER_PROCESS", 1)
    one = _write(bench, path, tmp_path / "one", 1, capsys)
    two = _write(bench, path, tmp_path / "two", 2, capsys)
    assert (one["region_jobs"], two["region_jobs"]) == (1, 2)
    assert one["refused"] == two["refused"]
    stitched = "tiny_stitched.py"
    assert (tmp_path / "one" / stitched).read_text() == (tmp_path / "two" / stitched).read_text()
