"""`kernelwright tasks generate`: seeded, reproducible, valid KernelBench-format tasks."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch

from kernelwright.cli.main import main as cli_main
from kernelwright.tasks import load_task
from kernelwright.tasks.generate import EXTRA_HEADS, HEADS, generate_task, generate_tasks


def files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_same_seed_writes_the_same_files_and_task_i_does_not_depend_on_count(tmp_path, capsys):
    assert cli_main(["tasks", "generate", "--out", str(tmp_path / "a"), "--count", "6", "--seed", "7"]) == 0
    assert cli_main(["tasks", "generate", "--out", str(tmp_path / "b"), "--count", "6", "--seed", "7"]) == 0
    assert files(tmp_path / "a") == files(tmp_path / "b")
    assert len(list((tmp_path / "a").glob("*.py"))) == 6
    manifest = json.loads((tmp_path / "a" / "tasks.json").read_text())
    assert manifest["seed"] == 7 and [t["name"] for t in manifest["tasks"]] == [
        t.name for t in generate_tasks(6, 7)
    ]
    assert generate_tasks(3, 7) == generate_tasks(6, 7)[:3]
    assert generate_tasks(6, 8) != generate_tasks(6, 7)


def test_every_generated_task_loads_and_its_reference_runs_on_small_inputs():
    tasks = generate_tasks(30, 0)
    assert {t.chain[0] for t in tasks} == set(HEADS)
    for t in tasks:
        ns: dict = {}
        exec(compile(t.source, t.name, "exec"), ns)
        model = ns["Model"](*ns["get_small_init_inputs"]())
        out = model(*ns["get_small_inputs"]())
        assert isinstance(out, torch.Tensor) and bool(torch.isfinite(out.float()).all()), t.name
        assert 1 <= len(t.chain) - 2 <= 3, t.chain  # head, one to three pointwise ops, tail


def test_generated_files_load_as_tasks(tmp_path):
    for i in (1, 2, 3, 4):
        t = generate_task(11, i)
        path = tmp_path / f"{t.name}.py"
        path.write_text(t.source)
        task = load_task(path)
        assert task.signature.op_families, t.name


# seed 0's 30 default tasks, byte for byte: the sets RESULTS.md measured must not change under them
SEED0_SHA256 = "b662eb0c12c421a5744d34d9f73cd56b67b5ccb2e9f4617eda2f5939e52a6743"


def test_default_sets_stay_what_they_were_and_extra_heads_come_only_when_named(tmp_path):
    default = generate_tasks(30, 0)
    assert hashlib.sha256("".join(t.source for t in default).encode()).hexdigest() == SEED0_SHA256
    assert generate_tasks(30, 0, HEADS) == default
    extra = generate_tasks(12, 0, EXTRA_HEADS)
    assert {t.chain[0] for t in extra} == set(EXTRA_HEADS)
    for t in extra:  # each loads as a task and its reference runs on its small inputs
        ns: dict = {}
        exec(compile(t.source, t.name, "exec"), ns)
        model = ns["Model"](*ns["get_small_init_inputs"]())
        conv = model.conv
        if t.chain[0] == "conv2d_depthwise":
            assert conv.groups == conv.in_channels == conv.out_channels > 1
        else:
            assert conv.groups == 1 and conv.in_channels <= 4
        out = model(*ns["get_small_inputs"]())
        assert bool(torch.isfinite(out.float()).all()), t.name
        assert t.chain[-1] != "layer_norm"  # over channels after a convolution, never over the width
    out = tmp_path / "dw"
    assert (
        cli_main(["tasks", "generate", "--out", str(out), "--count", "3", "--heads", "conv2d_depthwise"]) == 0
    )
    manifest = json.loads((out / "tasks.json").read_text())
    assert manifest["heads"] == ["conv2d_depthwise"]
    assert all(t["chain"][0] == "conv2d_depthwise" for t in manifest["tasks"])
    path = next(out.glob("*.py"))
    assert load_task(path).signature.op_families


@pytest.mark.parametrize("args,message", [
    (["--count", "0"], "give at least 1"),
    (["--count", "2"], "not empty"),
    (["--heads", "conv3d"], "unknown head conv3d; known: linear"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_status_2(tmp_path, capsys, args, message):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    assert cli_main(["tasks", "generate", "--out", str(out), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
