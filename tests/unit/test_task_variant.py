"""Tasks at bf16 or fp16 (`kernelwright tasks variant`, tasks/variant.py) and the bundled level1_bf16 and
level2_bf16 suites written by it."""

from __future__ import annotations

import pytest
import torch

from kernelwright.cli.main import main as cli_main
from kernelwright.tasks import bundled_suite_dir, load_task, load_task_source
from kernelwright.tasks.module import exec_task_module, task_init_inputs, task_inputs
from kernelwright.tasks.variant import dtype_variant

LABELS = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.proj = nn.Linear(8, classes)

    def forward(self, x, labels):
        return nn.functional.cross_entropy(self.proj(x), labels)


def get_inputs():
    return [torch.randn(4, 8), torch.randint(0, 3, (4,))]


def get_init_inputs():
    return [3]
"""


@pytest.mark.parametrize("level", ["level1", "level2"])
def test_the_bundled_bf16_suites_are_what_the_variant_writes(level):
    folder = bundled_suite_dir(f"{level}_bf16")  # type: ignore[arg-type]
    files = sorted(folder.glob("*.py"))
    assert len(files) >= 8
    for f in files:
        original = (bundled_suite_dir(level) / f.name).read_text()  # type: ignore[arg-type]
        assert f.read_text() == dtype_variant(original, "bfloat16"), (
            f"{f.name}: run `kernelwright tasks variant` again"
        )


@pytest.mark.parametrize("level", ["level1_bf16", "level2_bf16"])
def test_every_bf16_task_loads_and_its_reference_runs_in_bf16(level):
    for f in sorted(bundled_suite_dir(level).glob("*.py")):  # type: ignore[arg-type]
        task = load_task(f)
        assert set(task.signature.input_dtypes) == {"bfloat16"}, f.name
        module = exec_task_module(task.source, f.stem)
        model = module.Model(*task_init_inputs(module, small=True))
        assert all(p.dtype == torch.bfloat16 for p in model.parameters()), f.name
        assert all(b.dtype == torch.bfloat16 for b in model.buffers() if b.is_floating_point()), f.name
        inputs = task_inputs(module, seed=0, device="cpu", small=True)
        with torch.no_grad():
            out = model(*inputs)
        outs = out if isinstance(out, tuple | list) else (out,)
        assert all(o.dtype == torch.bfloat16 for o in outs if o.is_floating_point()), f.name


def test_integer_inputs_stay_integers_and_fp16_works_too():
    task = load_task_source(dtype_variant(LABELS, "float16"), "labels_fp16")
    assert task.signature.input_dtypes == ["float16", "int64"]
    module = exec_task_module(task.source, "labels_fp16")
    assert module.Model(3).proj.weight.dtype == torch.float16


def test_what_is_not_a_task_or_is_a_variant_already_is_refused(tmp_path, capsys):
    with pytest.raises(ValueError, match="no top-level get_inputs"):
        dtype_variant("import torch\n\n\nclass Model:\n    pass\n", "bfloat16")
    once = dtype_variant(LABELS, "bfloat16")
    with pytest.raises(ValueError, match="variant already"):
        dtype_variant(once, "float16")
    with pytest.raises(ValueError, match="choose one of"):
        dtype_variant(LABELS, "float8")
    src = tmp_path / "01_labels.py"
    src.write_text(LABELS)
    assert (
        cli_main(["tasks", "variant", "--dtype", "bfloat16", "--out", str(tmp_path / "out"), str(tmp_path)])
        == 0
    )
    assert (tmp_path / "out" / "01_labels.py").read_text() == once
    assert (
        cli_main(["tasks", "variant", "--dtype", "bfloat16", "--out", str(tmp_path / "out"), str(src)]) == 2
    )
    assert "not empty" in capsys.readouterr().err
    assert cli_main(["tasks", "variant", "--dtype", "float16", "--out", str(tmp_path / "o2"),
                     str(tmp_path / "out" / "01_labels.py")]) == 2  # fmt: skip
    assert "variant already" in capsys.readouterr().err
