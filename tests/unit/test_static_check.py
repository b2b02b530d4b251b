"""hardware.judge.static_check on candidate source strings (nothing is executed)."""

from __future__ import annotations

import textwrap

import pytest

from kernelwright.hardware.judge.static_check import static_check

HEADER = """
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)
    s = tl.sum(x, axis=0)
"""

GOOD_FORWARD = """
class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous().view(-1)
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out.reshape(x.shape)
"""


def check(body: str, header: str = HEADER, task_name: str | None = None):
    return static_check(header + textwrap.dedent(body), task_name)


def test_good_candidate_passes_with_no_torch_ops():
    rep = check(GOOD_FORWARD)
    assert rep.ok, rep.error
    assert rep.kernels == ["relu_kernel"] and rep.launched == ["relu_kernel"]
    # empty_like, view, reshape, contiguous, numel and tl.sum inside the kernel are not torch compute
    assert rep.torch_ops_remaining == []


def test_syntax_error_names_the_line():
    rep = static_check("class ModelNew:\n    def forward(self, x)\n        return x\n")
    assert (rep.ok, rep.error_kind) == (False, "syntax_error")
    assert rep.error.startswith("line 2:")


def test_missing_model_new():
    rep = check(GOOD_FORWARD.replace("ModelNew", "Other"))
    assert rep.error_kind == "static_check" and "no ModelNew" in rep.error


def test_model_new_without_forward():
    rep = check("class ModelNew(nn.Module):\n    pass\n\nrelu_kernel[(1,)](1, 2, 3, BLOCK=4)\n")
    assert "defines no forward" in rep.error


def test_pure_pytorch_is_rejected_and_ops_reported():
    rep = static_check("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                       "    def forward(self, x):\n        return torch.relu(x) @ x.t()\n")  # fmt: skip
    assert rep.error_kind == "static_check" and "no Triton kernel" in rep.error
    assert set(rep.torch_ops_remaining) == {"torch.relu (line 6)", "@ (matmul) (line 6)"}


def test_kernel_defined_but_never_launched():
    rep = check("class ModelNew(nn.Module):\n    def forward(self, x):\n        return F.relu(x)\n")
    assert "defined but never launched" in rep.error
    assert rep.torch_ops_remaining == ["F.relu (line 18)"]


def test_autotuned_kernel_and_from_import_alias():
    src = """
import torch
from torch import nn
from triton import autotune, Config, jit, cdiv
import triton.language as tl


@autotune(configs=[Config({"BLOCK": 128})], key=["n"])
@jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        k[lambda meta: (cdiv(x.numel(), meta["BLOCK"]),)](x, x.numel())
        return x
"""
    rep = static_check(src)
    assert rep.ok, rep.error
    assert rep.kernels == ["k"]


@pytest.mark.parametrize(
    ("body", "text"),
    [
        ("class ModelNew(Model):\n    pass\nrelu_kernel[(1,)](1, 2, 3, BLOCK=4)\n", "reference `Model`"),
        (GOOD_FORWARD + "\n_ref = Model()\n", "reference `Model`"),
        ("import importlib\n" + GOOD_FORWARD, "imports importlib"),
        ("import gc\n" + GOOD_FORWARD, "imports gc"),
        ("from inspect import currentframe\n" + GOOD_FORWARD, "imports inspect"),
        ("from tasks import load_task\n" + GOOD_FORWARD, "imports the task package"),
        ("from . import ref\n" + GOOD_FORWARD, "relative import"),
        ("import sys\nm = sys.modules\n" + GOOD_FORWARD, "sys.modules"),
        ("import sys\nf = sys._getframe(1)\n" + GOOD_FORWARD, "reads interpreter frames"),
        ("m = __import__('x')\n" + GOOD_FORWARD, "calls __import__()"),
        ("exec('x = 1')\n" + GOOD_FORWARD, "calls exec()"),
        (
            "torch.backends.cuda.matmul.allow_tf32 = True\n" + GOOD_FORWARD,
            "assigns torch.backends.cuda.matmul",
        ),
        (
            "torch.utils.deterministic.fill_uninitialized_memory = False\n" + GOOD_FORWARD,
            "assigns torch.utils",
        ),
        ("setattr(torch, 'relu', None)\n" + GOOD_FORWARD, "setattr() on torch"),
        ("torch.set_float32_matmul_precision('high')\n" + GOOD_FORWARD, "global torch state"),
        ("s = torch.cuda.Stream()\n" + GOOD_FORWARD, "side CUDA stream"),
    ],
)
def test_reaching_the_reference_or_harness_is_rejected(body, text):
    rep = check(body)
    assert rep.error_kind == "static_check", rep
    assert text in rep.error


def test_importing_the_task_module_by_name():
    rep = check("import relu_task\n" + GOOD_FORWARD, task_name="relu_task")
    assert "imports the task module" in rep.error


def test_setattr_on_own_objects_is_fine():
    rep = check(GOOD_FORWARD + "\nsetattr(ModelNew, 'flag', 1)\n")
    assert rep.ok, rep.error


def test_try_around_launch_is_rejected():
    rep = check("""
class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        try:
            relu_kernel[(1,)](x, out, x.numel(), BLOCK=1024)
        except RuntimeError:
            pass
        return out
""")
    assert "try/except around a launch of relu_kernel" in rep.error


def test_try_around_helper_that_launches_is_rejected():
    rep = check("""
def launch(x, out):
    relu_kernel[(1,)](x, out, x.numel(), BLOCK=1024)


def run(x):
    out = torch.empty_like(x)
    launch(x, out)
    return out


class ModelNew(nn.Module):
    def forward(self, x):
        try:
            return self.go(x)
        except Exception:
            raise

    def go(self, x):
        return run(x)
""")
    assert "call of go() which launches a kernel" in rep.error


def test_except_branch_computing_with_torch_is_rejected():
    rep = check(
        GOOD_FORWARD
        + """
def helper(x):
    try:
        y = int(x)
    except TypeError:
        y = x.sum()
    return y
"""
    )
    assert "except branch computes with torch (.sum())" in rep.error


def test_harmless_try_except_is_allowed():
    rep = check("try:\n    import numpy as np\nexcept ImportError:\n    np = None\n" + GOOD_FORWARD)
    assert rep.ok, rep.error


def test_torch_ops_remaining_are_reported_not_rejected():
    rep = check("""
class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)
        self.weight = nn.Parameter(torch.randn(n))
        nn.init.zeros_(self.weight)

    def forward(self, x):
        y = self.linear(x)
        y = torch.matmul(y, self.weight.t().contiguous())
        z = F.conv2d(x, x)
        out = torch.empty_like(y)
        relu_kernel[(1,)](y, out, y.numel(), BLOCK=1024)
        return out.sum(dim=-1) + z.stride(0)
""")
    assert rep.ok, rep.error
    assert rep.torch_ops_remaining == [
        "torch.nn.Linear (self.linear) (line 25)",
        "torch.matmul (line 26)",
        "F.conv2d (line 27)",
        ".sum() (line 30)",
    ]


LAUNCH_HELPER = """
def launch(kernel, grid, *args, **meta):
    kernel[grid](*args, **meta)
"""


def test_a_kernel_passed_to_a_launch_helper_is_launched():
    """Generated programs launch through a helper (`_kw_launch(kernel, grid, ...)`): that is a launch."""
    rep = check(
        LAUNCH_HELPER
        + """
class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        launch(relu_kernel, (1,), x, out, x.numel(), BLOCK=1024)
        return out
"""
    )
    assert rep.ok, rep.error
    assert rep.launched == ["relu_kernel"]
    # passing the kernel to a function that does not launch its first argument is not a launch
    rep = check("""
def keep(kernel, grid):
    return kernel, grid


class ModelNew(nn.Module):
    def forward(self, x):
        keep(relu_kernel, (1,))
        return F.relu(x)
""")
    assert "defined but never launched" in rep.error


def test_try_around_a_launch_through_a_helper_is_rejected():
    rep = check(
        LAUNCH_HELPER
        + """
class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        try:
            launch(relu_kernel, (1,), x, out, x.numel(), BLOCK=1024)
        except RuntimeError:
            return F.relu(x)
        return out
"""
    )
    assert "try/except around a launch of relu_kernel" in rep.error


@pytest.mark.parametrize(
    "line",
    [
        "n = torch._C._len_torch_dispatch_stack()",
        "n = getattr(torch._C, '_len_torch_dispatch_stack')()",
        "m = torch.utils._python_dispatch._get_current_dispatch_mode()",
        "m = torch._C._get_dispatch_stack_at(0)",
        "m = torch.overrides._get_current_function_mode_stack()",
        "k = torch._C._dispatch_tls_local_include_set()",
        "f = relu.__closure__",
    ],
)
def test_reading_the_harness_dispatch_modes_is_rejected(line):
    r = check(
        GOOD_FORWARD.replace(
            "        out = torch.empty_like(x)", f"        {line}\n        out = torch.empty_like(x)"
        )
    )
    assert not r.ok and r.error_kind == "static_check", r
    assert "dispatch or function modes" in r.error or "reads a function's closure" in r.error, r.error


def test_importing_a_mode_introspection_name_is_rejected():
    r = check(GOOD_FORWARD, header=HEADER + "from torch._C import _len_torch_dispatch_stack as depth\n")
    assert not r.ok and "(_len_torch_dispatch_stack)" in r.error, r.error


@pytest.mark.parametrize(
    "line",
    [
        "g = torch.cuda.CUDAGraph()",
        "ctx = torch.cuda.graph(None)",
        "f = torch.cuda.make_graphed_callables(relu, (x,))",
        "f = torch.compile(relu, mode='reduce-overhead')",
    ],
)
def test_cuda_graphs_are_rejected_with_why(line):
    r = check(
        GOOD_FORWARD.replace(
            "        out = torch.empty_like(x)", f"        {line}\n        out = torch.empty_like(x)"
        )
    )
    assert not r.ok and "CUDA graphs" in r.error and "replay launches kernels" in r.error, r.error
