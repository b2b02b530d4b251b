"""optimize-model end to end on CPU: the CLI on a small model, reuse of a region across two models
through memory, and a region that cannot be written kept in torch (real searches, judge and Chroma)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.cli.main import main as cli_main

MLP = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, hidden, out):
        super().__init__()
        self.fc1 = nn.Linear(10, hidden)
        self.fc2 = nn.Linear(hidden, out)

    def forward(self, x):
        h = torch.special.erfcx(F.relu(self.fc1(x)))
        return self.fc2(h)


def get_inputs():
    return [torch.randn(5, 10)]


def get_init_inputs():
    return [HIDDEN, OUT]
"""


def _write(tmp_path: Path, name: str, hidden: int, out: int) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(MLP.replace("HIDDEN", str(hidden)).replace("OUT", str(out)))
    return path


@pytest.mark.slow
def test_optimize_model_cli_then_a_second_model_reuses_the_shared_region(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = tmp_path / "memory"
    first = _write(tmp_path, "mlp_a", 12, 3)
    argv = ["optimize-model", str(first), "--device", "cpu", "--budget", "1", "--memory", str(memory)]
    assert cli_main([*argv, "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert "region signatures" in err and "evaluations" in err  # per-model progress lines
    a = json.loads((tmp_path / "a" / "model.json").read_text())
    assert a["regions"] == 3 and a["signatures"] == 3
    rows = {tuple(r["ops"]): r for r in a["rows"]}
    assert rows[("Linear", "relu")]["status"] == "searched" and rows[("Linear", "relu")]["correct"]
    assert rows[("special_erfcx",)]["status"] == "kept in torch"  # not written as a task: kept, no crash
    assert rows[("Linear", "relu")]["search_s"] > 0 and rows[("special_erfcx",)]["search_s"] is None
    assert (tmp_path / "a" / "regions" / f"region_{rows[('Linear', 'relu')]['signature']}.py").is_file()
    assert a["correct"] is True  # the stitched model, judged whole
    assert "| regions | operators |" in (tmp_path / "a" / "model.md").read_text()

    # the same model into the same folder, memory off: its searched regions are taken from their runs there
    again = ["optimize-model", str(first), "--device", "cpu", "--budget", "1", "--memory", "off"]
    assert cli_main([*again, "--out", str(tmp_path / "a")]) == 0
    a2 = json.loads((tmp_path / "a" / "model.json").read_text())
    rows2 = {tuple(r["ops"]): r for r in a2["rows"]}
    assert rows2[("Linear", "relu")]["status"] == "searched" and rows2[("Linear", "relu")]["correct"], rows2
    assert rows2[("Linear", "relu")]["search_s"] is None  # its search was done by the first run
    assert a2["correct"] is True

    # same first layer, another head: the first region comes from memory, only the head is searched
    second = _write(tmp_path, "mlp_b", 12, 4)
    argv[1] = str(second)
    assert cli_main([*argv, "--out", str(tmp_path / "b")]) == 0
    b = json.loads((tmp_path / "b" / "model.json").read_text())
    rows_b = {tuple(r["ops"]): r for r in b["rows"]}
    shared = rows_b[("Linear", "relu")]
    assert shared["signature"] == rows[("Linear", "relu")]["signature"]
    assert shared["status"] == "from memory" and shared["evaluations"] == 0
    assert not (tmp_path / "b" / "regions" / shared["signature"]).exists()  # no search folder for it
    assert rows_b[("Linear",)]["status"] == "searched"
    assert b["correct"] is True


def test_optimize_model_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["optimize-model", str(tmp_path / "none.py"), "--device", "cpu"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n\n\nclass Model(torch.nn.Module):\n    pass\n")
    assert cli_main(["optimize-model", str(bad), "--device", "cpu", "--out", str(tmp_path / "o")]) == 2
    assert "defines no get_inputs" in capsys.readouterr().err


@pytest.mark.slow
def test_bench_runs_a_level3_folder_region_by_region(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "level3"
    folder.mkdir()
    _write(folder, "1_small_mlp", 12, 3)
    out = tmp_path / "out"
    argv = ["bench", str(folder), "--device", "cpu", "--budget", "1", "--memory", "fresh", "--out", str(out)]
    assert cli_main(argv) == 0
    runs = list(out.rglob("model.json"))  # the model's run folder, made by graphs/model.py
    assert len(runs) == 1
    model = json.loads(runs[0].read_text())
    assert model["regions"] == 3 and model["correct"] is True and model["judge_s"] > 0
    rows = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines() if line.strip()]
    assert rows[-1]["status"] == "correct" and "regions with a kernel" in rows[-1]["verdict"]
    shown = capsys.readouterr().out  # no live panel here: the model's phases, a line each
    assert "level3/1_small_mlp (cpu): regions 0/" in shown and "the stitched model: judging" in shown


def test_optimize_model_in_python_takes_the_runs_options_as_keywords(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kernelwright.optimize_model(model, example_inputs, device=..., budget=...)` on a module whose class
    is defined in a file of the user's (imported as the user would); an unknown keyword is a TypeError
    that lists the options, before anything runs."""
    import importlib

    import torch

    import kernelwright

    (tmp_path / "users_model.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Gate(nn.Module):\n    def __init__(self, d):\n"
        "        super().__init__()\n        self.fc = nn.Linear(d, d)\n\n    def forward(self, x):\n"
        "        return torch.sigmoid(self.fc(x)) * x\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    gate = importlib.import_module("users_model").Gate(8)
    x = torch.randn(4, 8)
    with pytest.raises(
        TypeError, match=r"unknown keyword out; options are Context's fields \(.*budget.*device"
    ):
        kernelwright.optimize_model(gate, [x], init_inputs=[8], out=str(tmp_path / "o"))
    assert not (tmp_path / "o").exists()
    result = kernelwright.optimize_model(
        gate, [x], init_inputs=[8], device="cpu", budget=1, memory="fresh", run_dir=str(tmp_path / "run")
    )
    assert result.correct and result.regions == result.regions_with_kernel == 1, result.verdict
    assert (tmp_path / "run" / "example.pt").is_file() and (
        tmp_path / "run" / "run" / "stitched.py"
    ).is_file()
