"""The task format: loading, analysis without full-size allocation, bundled suites, and bad task files."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from kernelwright.hardware.roofline import roofline_floor_ms
from kernelwright.tasks import (
    OP_FAMILIES,
    Task,
    TaskError,
    bundled_suite_dir,
    exec_task_module,
    load_suite,
    load_task,
    load_task_source,
    op_family,
    task_init_inputs,
    task_inputs,
    task_model,
)

LEVEL1_NAMES = [
    "01_relu",
    "02_gelu",
    "03_silu",
    "04_tanh",
    "05_sum_last_dim",
    "06_mean_middle_dim",
    "07_max_last_dim",
    "08_argmax_middle_dim",
    "09_softmax",
    "10_log_softmax",
    "11_layer_norm",
    "12_rms_norm",
    "13_l2_norm",
    "14_matmul_square",
    "15_matmul_rect",
    "16_bmm",
    "17_matmul_transposed_a",
    "18_matvec",
    "19_cumsum",
    "20_cross_entropy_loss",
    "21_mse_loss",
    "22_logsumexp_middle_dim",
    "23_sum_all",
    "24_smooth_l1_loss",
    "25_argmin_last_dim",
    "26_min_middle_dim",
]

F32 = 4


@pytest.fixture(scope="module")
def level1() -> dict[str, Task]:
    return {t.name: t for t in load_suite(bundled_suite_dir("level1"))}


@pytest.fixture(scope="module")
def level2() -> dict[str, Task]:
    # Only this project's fused tasks; fused-convolution tasks numbered 20+ may sit beside them.
    return {t.name: t for t in load_suite(bundled_suite_dir("level2"))}


def _write(tmp_path: Path, body: str, name: str = "task.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body).lstrip())
    return path


def _numel(shapes: list[list[int]]) -> int:
    total = 0
    for shape in shapes:
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


GOOD = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(5, 7)]

def get_init_inputs():
    return []
"""


# --- bundled suites -------------------------------------------------------------------------------------


def test_level1_has_exactly_the_named_tasks_in_order(level1: dict[str, Task]) -> None:
    assert list(level1) == LEVEL1_NAMES
    for name in LEVEL1_NAMES:
        assert (bundled_suite_dir("level1") / f"{name}.py").is_file()


def test_level2_has_at_least_ten_fused_tasks(level2: dict[str, Task]) -> None:
    ours = [n for n in level2 if int(n.split("_")[0]) < 20]
    assert len(ours) >= 10
    assert "09_conv2d_bias_relu" in ours and "10_conv2d_sigmoid_sum" in ours


def test_every_bundled_task_has_small_inputs_and_a_full_signature(
    level1: dict[str, Task], level2: dict[str, Task]
) -> None:
    for task in [*level1.values(), *level2.values()]:
        sig = task.signature
        assert task.has_small_inputs and task.small_signature is not None, task.name
        assert task.cost_exact and task.checked_on == "cpu-small", task.name
        assert sig.op_families and set(sig.op_families) <= set(OP_FAMILIES), task.name
        assert sig.input_shapes and sig.output_shapes, task.name
        assert task.small_signature.op_families == sig.op_families, task.name
        # Small inputs are much smaller than full ones, and use odd sizes somewhere.
        small_n, full_n = _numel(task.small_signature.input_shapes), _numel(sig.input_shapes)
        assert small_n * 10 < full_n, task.name
        assert any(d % 2 for s in task.small_signature.input_shapes for d in s), task.name
        # Full sizes are for an H200: even the roofline floor of one run (the least time any kernel
        # could take there) is >= 20 us, far past a launch's few microseconds of overhead.
        floor = roofline_floor_ms(task, "nvidia-h200")
        assert floor.floor_ms is not None and floor.floor_ms >= 0.020, (task.name, floor.floor_ms)


@pytest.mark.parametrize(
    ("name", "families"),
    [
        ("01_relu", ["pointwise"]),
        ("06_mean_middle_dim", ["reduction"]),
        ("08_argmax_middle_dim", ["reduction"]),
        ("09_softmax", ["softmax"]),
        ("11_layer_norm", ["norm"]),
        ("12_rms_norm", ["norm"]),
        ("13_l2_norm", ["norm"]),
        ("16_bmm", ["matmul"]),
        ("17_matmul_transposed_a", ["matmul"]),
        ("19_cumsum", ["scan"]),
        ("20_cross_entropy_loss", ["loss"]),
        ("24_smooth_l1_loss", ["loss"]),
    ],
)
def test_level1_families(level1: dict[str, Task], name: str, families: list[str]) -> None:
    assert level1[name].signature.op_families == families


@pytest.mark.parametrize(
    ("name", "families"),
    [
        ("01_linear_bias_relu", ["matmul", "pointwise"]),
        ("03_matmul_softmax", ["matmul", "softmax"]),
        ("05_rmsnorm_silu_gate", ["norm", "pointwise"]),
        ("07_sum_middle_tanh", ["reduction", "pointwise"]),
        ("10_conv2d_sigmoid_sum", ["conv", "pointwise", "reduction"]),
        ("11_linear_layernorm_relu", ["matmul", "norm", "pointwise"]),
    ],
)
def test_level2_families(level2: dict[str, Task], name: str, families: list[str]) -> None:
    assert level2[name].signature.op_families == families


def test_flops_and_bytes_at_full_size(level1: dict[str, Task], level2: dict[str, Task]) -> None:
    for name in ("14_matmul_square", "15_matmul_rect", "16_bmm", "17_matmul_transposed_a", "18_matvec"):
        assert level1[name].flops > 0, name
    assert level1["14_matmul_square"].flops == 2 * 8192**3
    assert level1["16_bmm"].flops == 2 * 32 * 2048 * 1024 * 2048
    assert level2["09_conv2d_bias_relu"].flops == 2 * 64 * 128 * 126 * 126 * 64 * 9
    for name in ("01_relu", "09_softmax", "19_cumsum"):
        assert level1[name].flops == 0, name
    # A pointwise task reads its input once and writes an output of the same size.
    assert level1["01_relu"].min_bytes == 2 * 4096 * 16384 * F32
    assert level1["14_matmul_square"].min_bytes == 3 * 8192 * 8192 * F32
    # Parameters count once: LayerNorm's weight and bias.
    assert level1["11_layer_norm"].min_bytes == (2 * 8192 * 8192 + 2 * 8192) * F32
    # int64 targets count at 8 bytes; the loss is one scalar.
    assert level1["20_cross_entropy_loss"].min_bytes == 32768 * 4096 * F32 + 32768 * 8 + F32


def test_signature_shapes_and_dtypes(level1: dict[str, Task]) -> None:
    sig = level1["08_argmax_middle_dim"].signature
    assert sig.input_shapes == [[128, 4096, 256]] and sig.input_dtypes == ["float32"]
    assert sig.output_shapes == [[128, 256]] and sig.output_dtypes == ["int64"]
    assert level1["17_matmul_transposed_a"].signature.ops == ["permute", "mm"]
    assert "matmul" in level1["14_matmul_square"].signature.key()


# --- module helpers ------------------------------------------------------------------------------------


def test_exec_task_module_is_isolated() -> None:
    a = exec_task_module(GOOD + "\nMARK = 'a'\n", "task_a")
    b = exec_task_module(GOOD + "\nMARK = 'b'\n", "task_b")
    assert (a.MARK, b.MARK) == ("a", "b")
    assert a.Model is not b.Model
    assert "task_a" not in sys.modules and "task_b" not in sys.modules


def test_task_inputs_seeded_small_and_moved() -> None:
    module = exec_task_module((bundled_suite_dir("level1") / "15_matmul_rect.py").read_text(), "rect")
    first = task_inputs(module, small=True, seed=3, device="cpu")
    again = task_inputs(module, small=True, seed=3, device=torch.device("cpu"))
    other = task_inputs(module, small=True, seed=4, device="cpu")
    assert [list(t.shape) for t in first] == [[75, 93], [93, 41]]
    assert all(torch.equal(x, y) for x, y in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])
    with torch.device("meta"):
        full = task_inputs(module, small=False, seed=0, device="meta")
    assert [list(t.shape) for t in full] == [[8192, 2048], [2048, 8192]] and full[0].is_meta


def test_meta_runs_unseeded_leave_the_rng_alone() -> None:
    """seed=None (the meta device's size checks, hundreds per model) neither seeds nor draws from torch's RNG
    outside the task's own calls: the same shapes, and the generator where it was."""
    module = exec_task_module((bundled_suite_dir("level2") / "01_linear_bias_relu.py").read_text(), "lin")
    torch.manual_seed(11)
    expected = torch.rand(3)
    torch.manual_seed(11)
    with torch.device("meta"):
        inputs = task_inputs(module, small=False, seed=None, device="meta")
        model = task_model(module, small=False, seed=None, device="meta")
    assert [list(t.shape) for t in inputs] == [[8192, 4096]] and model.linear.weight.is_meta
    # meta tensors draw nothing: the generator is where the seed left it
    assert torch.equal(torch.rand(3), expected)


def test_small_init_inputs_pair_with_small_inputs() -> None:
    module = exec_task_module((bundled_suite_dir("level2") / "01_linear_bias_relu.py").read_text(), "lin")
    assert task_init_inputs(module) == [4096, 4096]
    assert task_init_inputs(module, small=True) == [333, 127]
    model = task_model(module, small=True, seed=0)
    out = model(*task_inputs(module, small=True, seed=0))
    assert list(out.shape) == [7, 127]
    # The same seed builds the same parameters, as reference and candidate need.
    twin = task_model(module, small=True, seed=0)
    assert torch.equal(model.linear.weight, twin.linear.weight)


def test_op_family_mapping() -> None:
    aten = torch.ops.aten
    assert op_family(aten.add.Tensor) == "pointwise"
    assert op_family(aten.addmm.default) == "matmul"
    assert op_family(aten.convolution.default) == "conv"
    assert op_family(aten.amax.default) == "reduction"
    assert op_family(aten.cumsum.default) == "scan"
    assert op_family(aten.max_pool2d_with_indices.default) == "pool"
    assert op_family(aten.view.default) is None
    assert op_family(aten.sort.default) == "other"


# --- loading user tasks --------------------------------------------------------------------------------


def test_load_task_source_and_rng_untouched() -> None:
    state = torch.get_rng_state()
    task = load_task_source(GOOD, "relu_small")
    assert torch.equal(state, torch.get_rng_state())
    assert task.name == "relu_small" and task.path is None and task.source == GOOD
    # No get_small_inputs and a tiny full size: the full size ran for real on CPU.
    assert not task.has_small_inputs and task.small_signature is None and task.checked_on == "cpu-full"
    assert task.signature.op_families == ["pointwise"] and task.min_bytes == 2 * 5 * 7 * F32


def test_tuple_of_tensors_output_is_fine(tmp_path: Path) -> None:
    body = GOOD.replace("return torch.relu(x)", "return x.max(dim=1)")  # (values, indices)
    task = load_task(_write(tmp_path, body))
    assert task.signature.output_dtypes == ["float32", "int64"]


def test_full_size_is_never_allocated(tmp_path: Path) -> None:
    # 2**48 floats (1 PiB) cannot be allocated on any machine: this loads only because the full size runs
    # on the meta device; the small size runs for real.
    body = GOOD + "\ndef get_small_inputs():\n    return [torch.randn(3, 5)]\n"
    body = body.replace("torch.randn(5, 7)", "torch.randn(2**24, 2**24)")
    task = load_task(_write(tmp_path, body))
    assert task.signature.input_shapes == [[2**24, 2**24]]
    assert task.min_bytes == 2 * 2**48 * F32 and task.cost_exact


def test_large_task_without_small_inputs_is_checked_on_meta(tmp_path: Path) -> None:
    task = load_task(_write(tmp_path, GOOD.replace("torch.randn(5, 7)", "torch.randn(2**24, 2**24)")))
    assert task.checked_on == "meta" and not task.has_small_inputs


def test_meta_unsupported_forward_falls_back_to_small_run(tmp_path: Path) -> None:
    body = """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            k = int(x.abs().argmax().item()) % 3 + 1  # data-dependent: cannot run on meta
            return x * k

    def get_inputs():
        return [torch.randn(4096, 8192)]

    def get_init_inputs():
        return []

    def get_small_inputs():
        return [torch.randn(3, 5)]
    """
    task = load_task(_write(tmp_path, body))
    assert not task.cost_exact and task.flops == 0
    assert task.min_bytes == 4096 * 8192 * F32  # the input, read once: a lower bound
    assert task.signature.input_shapes == [[4096, 8192]] and task.signature.output_shapes == []
    assert task.small_signature is not None and task.small_signature.output_shapes == [[3, 5]]
    assert "pointwise" in task.signature.op_families


def _error(path_or_source: Path | str) -> str:
    with pytest.raises(TaskError) as info:
        if isinstance(path_or_source, Path):
            load_task(path_or_source)
        else:
            load_task_source(path_or_source, "bad")
    message = str(info.value)
    assert "\n" not in message and message
    assert isinstance(info.value, ValueError)
    return message


def test_error_file_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "nope.py"
    assert _error(missing) == f"{missing}: task file not found"


def test_error_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace("return torch.relu(x)", "return torch.relu(x"))
    message = _error(path)
    assert re.fullmatch(rf"{re.escape(str(path))}:6: syntax error: .*", message), message


def test_error_no_model(tmp_path: Path) -> None:
    message = _error(_write(tmp_path, GOOD.replace("class Model(", "class Net(")))
    assert message.endswith(": no Model class (a task defines class Model(nn.Module))")


def test_error_model_not_a_module() -> None:
    message = _error(GOOD.replace("class Model(nn.Module):", "class Model:"))
    assert message == "<task bad>: Model is not a torch.nn.Module subclass"


def test_error_no_get_inputs(tmp_path: Path) -> None:
    message = _error(_write(tmp_path, GOOD.replace("def get_inputs(", "def make_inputs(")))
    assert message.endswith(": no get_inputs() function")


def test_error_no_get_init_inputs(tmp_path: Path) -> None:
    message = _error(_write(tmp_path, GOOD.replace("def get_init_inputs(", "def init_inputs(")))
    assert message.endswith(": no get_init_inputs() function")


def test_error_forward_raises_names_exception_and_line(tmp_path: Path) -> None:
    body = GOOD.replace("return torch.relu(x)", "return x @ torch.ones(3, 2)")
    path = _write(tmp_path, body)
    message = _error(path)
    assert message.startswith(f"{path}: forward raised RuntimeError: ")
    assert "cannot be multiplied" in message and message.endswith("(line 6)")


def test_error_forward_raises_python_error() -> None:
    message = _error(GOOD.replace("return torch.relu(x)", "return self.missing(x)"))
    assert message.startswith("<task bad>: forward raised AttributeError: ") and "missing" in message


def test_error_full_size_only_bug_is_caught_on_meta() -> None:
    # Small inputs fit the model; the full-size inputs do not: found without running the full size.
    body = """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.linear = nn.Linear(n, 3)

        def forward(self, x):
            return self.linear(x)

    def get_inputs():
        return [torch.randn(8192, 4095)]

    def get_init_inputs():
        return [4096]

    def get_small_inputs():
        return [torch.randn(3, 5)]

    def get_small_init_inputs():
        return [5]
    """
    message = _error(textwrap.dedent(body))
    assert message.startswith("<task bad>: forward at the full size (get_inputs()) raised RuntimeError: ")


@pytest.mark.parametrize(
    ("ret", "got"),
    [("42", "int"), ("(x, 1.5)", "tuple of Tensor, float"), ("None", "NoneType"), ("[]", "list of nothing"),
     ("{0: x}", "dict"), ('{"y": 1.5}', "dict")],
)  # fmt: skip
def test_error_non_tensor_outputs(ret: str, got: str) -> None:
    message = _error(GOOD.replace("return torch.relu(x)", f"return {ret}"))
    assert message == (
        f"<task bad>: forward returned {got}; expected a tensor, a tuple/list of tensors or a dict of them with "
        "string keys"
    )


def test_error_get_inputs_raises_and_wrong_type() -> None:
    message = _error(GOOD.replace("return [torch.randn(5, 7)]", "raise KeyError('size')"))
    assert message.startswith("<task bad>: get_inputs() raised KeyError: ")
    message = _error(GOOD.replace("return [torch.randn(5, 7)]", "return torch.randn(5, 7)"))
    assert message == "<task bad>: get_inputs() returned Tensor; expected a list"


def test_error_module_top_level_raises() -> None:
    message = _error("import torch\nraise ImportError('no such thing')\n")
    assert message == "<task bad>: running the module raised ImportError: no such thing (line 2)"


def test_error_meta_unsupported_and_too_large_without_small_inputs(tmp_path: Path) -> None:
    body = GOOD.replace("return torch.relu(x)", "return x * x.sum().item()").replace(
        "torch.randn(5, 7)", "torch.randn(8192, 8192)"
    )
    message = _error(_write(tmp_path, body))
    assert "does not run on the meta device" in message and message.endswith("define get_small_inputs()")


def test_load_suite_errors(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="suite folder not found"):
        load_suite(tmp_path / "missing")
    with pytest.raises(TaskError, match="no task files"):
        load_suite(tmp_path)
    with pytest.raises(TaskError, match="unknown bundled suite"):
        bundled_suite_dir("level9")  # type: ignore[arg-type]


def test_load_suite_sorted_by_file_name(tmp_path: Path) -> None:
    for name in ("b_task.py", "a_task.py", "_helper.py"):
        _write(tmp_path, GOOD, name)
    assert [t.name for t in load_suite(tmp_path)] == ["a_task", "b_task"]
