"""Programs from the offline writer, verified by the real harness (CPU workers, Triton interpreter).

Every family's kernels must match the reference at small odd shapes, on bundled tasks and on
KernelBench-style tasks the writer has never seen (below). Large and small steps must give different
programs that still verify; a rule or an experience case in the prompt must change what is written.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from kernelwright.hardware import EvalConfig, WorkerPool
from kernelwright.providers.offline import parse_meta, write_program
from kernelwright.tasks import bundled_suite_dir, load_task, load_task_source
from tests.fakes.writer import check_programs, run_interpreted
from tests.fakes.writer import writer_prompt as _prompt

CFG = EvalConfig(device="cpu", time=False, timeout=240, trials=3)


def _task(source: str, name: str):
    return load_task_source(textwrap.dedent(source), name)


def _check(pool: WorkerPool, jobs: list[tuple[str, object, str]]) -> None:
    check_programs(pool, jobs, CFG)


def _bundled(level: str, name: str):
    return load_task(bundled_suite_dir(level) / name)  # type: ignore[arg-type]


# One bundled task per family and layout (the slow test below runs all of them).
FAMILY_TASKS = [
    ("level1", "02_gelu.py"),  # pointwise
    ("level1", "06_mean_middle_dim.py"),  # reduction over a middle dim (cols layout)
    ("level1", "08_argmax_middle_dim.py"),  # fused value+index reduction
    ("level1", "10_log_softmax.py"),  # softmax
    ("level1", "11_layer_norm.py"),  # norm
    ("level1", "19_cumsum.py"),  # scan
    ("level1", "20_cross_entropy_loss.py"),  # loss: row kernel, then a global mean
    ("level1", "23_sum_all.py"),  # global reduction
    ("level1", "17_matmul_transposed_a.py"),  # matmul through strides
    ("level2", "06_bmm_scale_residual.py"),  # batched matmul with a fused epilogue
]
# The convolution family: level2/24's first program (a depthwise convolution with training-mode batch norm) is
# direct_depthwise at its default tiles, which tests/kernels/test_conv.py judges (at the task's second shape too).
CONV_FAMILY_TASK = ("level2", "24_conv2d_depthwise_batchnorm_relu6.py")


def test_each_family_verifies_at_odd_shapes(pool):
    jobs = []
    for level, name in FAMILY_TASKS:
        task = _bundled(level, name)
        answer = write_program(_prompt(task.source))
        assert answer.code is not None, f"{name}: {answer.explanation}"
        jobs.append((f"{name} [{answer.meta.design}]", task, answer.code))
    _check(pool, jobs)
    from kernelwright.providers.offline.families.conv.conv import (
        analyze_conv_task,
        default_conv_config,
        emit_conv_program,
    )

    source = _bundled(*CONV_FAMILY_TASK).source
    plan = analyze_conv_task(source).plan
    assert plan is not None
    config = default_conv_config("direct_depthwise", plan, "strict").model_copy(update={"RECOMPUTE": False})
    judged = emit_conv_program(plan, source, design="direct_depthwise", config=config)
    assert write_program(_prompt(source)).code == judged  # test_conv.py's [False] program


# ---- tasks the writer has never seen ---------------------------------------------------------------

_HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"

UNSEEN = {
    # fp16, values ~16 into an activation and a softmax: torch computes each of those ops in fp32 and rounds
    # once; rounding every step of them to fp16 (x * 6 in hardswish, x - max before the exp) was 16 ulps off
    # (a generated task, seed 3 #6, under the interpreter)
    "fp16_hardswish_elu_softmax_rows": """
        class Model(nn.Module):
            def forward(self, x):
                return torch.softmax(F.hardswish(x) + F.elu(x * 0.25), dim=-1)

        def get_inputs():
            return [torch.randn(64, 1024, dtype=torch.float16) * 8]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(6, 37, dtype=torch.float16) * 8]
    """,
    # ... and a variance, a norm and addcmul of fp16 rows far from zero (torch: fp32 inside, one rounding)
    "fp16_var_norm_addcmul_rows": """
        class Model(nn.Module):
            def forward(self, x, y):
                v = torch.var(x, dim=-1) + torch.linalg.vector_norm(x, dim=-1) * 0.5
                return torch.addcmul(y, y, y, value=0.25) * v[:, None]

        def get_inputs():
            return [torch.randn(64, 1024, dtype=torch.float16) * 4 + 40, torch.randn(64, 1024, dtype=torch.float16)]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(6, 37, dtype=torch.float16) * 4 + 40, torch.randn(6, 37, dtype=torch.float16)]
    """,
    "hardswish_gate_broadcast": """
        class Model(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.shift = nn.Parameter(torch.randn(channels, 1) * 0.1)

            def forward(self, x, y):
                return F.hardswish(x) * torch.clamp(y, -1.0, 1.0) + self.shift

        def get_inputs():
            return [torch.randn(16, 64, 512), torch.randn(16, 64, 512)]
        def get_init_inputs():
            return [64]
        def get_small_inputs():
            return [torch.randn(3, 5, 37), torch.randn(3, 5, 37)]
        def get_small_init_inputs():
            return [5]
    """,
    "frobenius_normalize": """
        class Model(nn.Module):
            def forward(self, x):
                return x / torch.norm(x, p="fro")

        def get_inputs():
            return [torch.randn(64, 256, 256)]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(3, 7, 11)]
    """,
    "group_norm_module": """
        class Model(nn.Module):
            def __init__(self, groups, channels):
                super().__init__()
                self.gn = nn.GroupNorm(groups, channels)

            def forward(self, x):
                return self.gn(x)

        def get_inputs():
            return [torch.randn(8, 64, 32, 32)]
        def get_init_inputs():
            return [8, 64]
        def get_small_inputs():
            return [torch.randn(2, 6, 5, 7)]
        def get_small_init_inputs():
            return [3, 6]
    """,
    "kl_div_batchmean": """
        class Model(nn.Module):
            def forward(self, p, t):
                return F.kl_div(torch.log_softmax(p, dim=-1), torch.softmax(t, dim=-1), reduction="batchmean")

        def get_inputs():
            return [torch.randn(128, 4096), torch.randn(128, 4096)]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(5, 33), torch.randn(5, 33)]
    """,
    "triplet_margin": """
        class Model(nn.Module):
            def __init__(self, margin):
                super().__init__()
                self.loss = nn.TripletMarginLoss(margin=margin)

            def forward(self, a, p, n):
                return self.loss(a, p, n)

        def get_inputs():
            return [torch.randn(128, 512), torch.randn(128, 512), torch.randn(128, 512)]
        def get_init_inputs():
            return [1.0]
        def get_small_inputs():
            return [torch.randn(7, 19), torch.randn(7, 19), torch.randn(7, 19)]
        def get_small_init_inputs():
            return [0.5]
    """,
    "cumprod_middle_dim": """
        class Model(nn.Module):
            def forward(self, x):
                return torch.cumprod(x, dim=1)

        def get_inputs():
            return [torch.rand(16, 256, 64) * 0.2 + 0.9]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.rand(3, 9, 5) * 0.2 + 0.9]
    """,
    "gemm_sigmoid_rowsum": """
        class Model(nn.Module):
            def __init__(self, k, n):
                super().__init__()
                self.fc = nn.Linear(k, n)

            def forward(self, x):
                return torch.sigmoid(self.fc(x)).sum(dim=1, keepdim=True)

        def get_inputs():
            return [torch.randn(512, 1024)]
        def get_init_inputs():
            return [1024, 512]
        def get_small_inputs():
            return [torch.randn(7, 23)]
        def get_small_init_inputs():
            return [23, 13]
    """,
    "argmax_first_dim": """
        class Model(nn.Module):
            def forward(self, x):
                return torch.argmax(x, dim=0)

        def get_inputs():
            return [torch.randn(64, 4096)]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(9, 33)]
    """,
    "linear_3d_gelu": """
        class Model(nn.Module):
            def __init__(self, k, n):
                super().__init__()
                self.proj = nn.Linear(k, n)

            def forward(self, x):
                return F.gelu(self.proj(x), approximate="tanh")

        def get_inputs():
            return [torch.randn(8, 128, 256)]
        def get_init_inputs():
            return [256, 384]
        def get_small_inputs():
            return [torch.randn(2, 5, 19)]
        def get_small_init_inputs():
            return [19, 11]
    """,
    "masked_cumsum_int_count": """
        class Model(nn.Module):
            def forward(self, x, mask):
                return torch.cumsum(x * mask, dim=1), (x > 0).sum(dim=1)

        def get_inputs():
            return [torch.randn(64, 4096), torch.rand(64, 4096) > 0.5]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(5, 37), torch.rand(5, 37) > 0.5]
    """,
}

SLOW_UNSEEN = {
    # Each of these once exposed a bug: a view of a computed value, a permuted (non-walkable) input,
    # a constant with no tensor to take its shape from, fp16 rounding, softmax over dim 0, a scalar input.
    "relu_view_mean": """
        class Model(nn.Module):
            def forward(self, x):
                return torch.relu(x).view(x.size(0), -1).mean(1)

        def get_inputs():
            return [torch.randn(64, 32, 32)]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(3, 5, 7)]
    """,
    "permuted_sum": """
        class Model(nn.Module):
            def forward(self, x):
                return x.permute(0, 2, 1).contiguous().sum(-1)

        def get_inputs():
            return [torch.randn(16, 128, 256)]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(3, 9, 5)]
    """,
    "exclusive_cumsum": """
        class Model(nn.Module):
            def forward(self, x):
                return torch.cumsum(torch.cat((torch.zeros_like(x[:, :1]), x), dim=1), dim=1)[:, :-1]

        def get_inputs():
            return [torch.randn(128, 4000)]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(3, 17)]
    """,
    "half_gelu": """
        class Model(nn.Module):
            def forward(self, x):
                return F.gelu(x.half()).float()

        def get_inputs():
            return [torch.randn(1024, 1024)]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(5, 13)]
    """,
    "softmax_first_dim_scalar_input": """
        class Model(nn.Module):
            def forward(self, x, s):
                return torch.softmax(x, dim=0) * s

        def get_inputs():
            return [torch.randn(512, 256), 3.5]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(7, 11), 3.5]
    """,
    "batch_norm_training": """
        class Model(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.bn = nn.BatchNorm2d(c)

            def forward(self, x):
                return self.bn(x)

        def get_inputs():
            return [torch.randn(16, 32, 64, 64)]
        def get_init_inputs():
            return [32]
        def get_small_inputs():
            return [torch.randn(3, 5, 7, 9)]
        def get_small_init_inputs():
            return [5]
    """,
    "var_plus_std": """
        class Model(nn.Module):
            def forward(self, x):
                return torch.var(x, dim=-1) + x.std(dim=-1, unbiased=False)

        def get_inputs():
            return [torch.randn(256, 8192)]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(6, 45)]
    """,
    "max_keepdim_subtract": """
        class Model(nn.Module):
            def forward(self, x):
                return x - x.max(dim=1, keepdim=True)[0]

        def get_inputs():
            return [torch.randn(32, 512, 128)]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(3, 11, 6)]
    """,
    "prod_rows": """
        class Model(nn.Module):
            def forward(self, x):
                return torch.prod(x, dim=1)

        def get_inputs():
            return [torch.rand(256, 512) * 0.2 + 0.9]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.rand(5, 29) * 0.2 + 0.9]
    """,
    "cosine_similarity_loss": """
        class Model(nn.Module):
            def forward(self, a, b):
                return torch.mean(1 - F.cosine_similarity(a, b, dim=1))

        def get_inputs():
            return [torch.randn(256, 1024), torch.randn(256, 1024)]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(7, 31), torch.randn(7, 31)]
    """,
    "hinge_loss": """
        class Model(nn.Module):
            def forward(self, p, t):
                return torch.mean(torch.clamp(1 - p * t, min=0))

        def get_inputs():
            return [torch.randn(4096, 128), torch.sign(torch.randn(4096, 128))]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(9, 13), torch.sign(torch.randn(9, 13))]
    """,
    "instance_norm_leaky": """
        class Model(nn.Module):
            def __init__(self, c, slope):
                super().__init__()
                self.norm = nn.InstanceNorm2d(c)
                self.slope = slope

            def forward(self, x):
                return F.leaky_relu(self.norm(x), self.slope)

        def get_inputs():
            return [torch.randn(16, 64, 64, 64)]
        def get_init_inputs():
            return [64, 0.2]
        def get_small_inputs():
            return [torch.randn(2, 3, 5, 7)]
        def get_small_init_inputs():
            return [3, 0.1]
    """,
    "matmul_4d_scaled": """
        class Model(nn.Module):
            def __init__(self, scale):
                super().__init__()
                self.scale = scale

            def forward(self, q, k):
                return torch.matmul(q, k.transpose(-2, -1)) * self.scale

        def get_inputs():
            return [torch.randn(4, 8, 256, 64), torch.randn(4, 8, 256, 64)]
        def get_init_inputs():
            return [0.125]
        def get_small_inputs():
            return [torch.randn(2, 3, 9, 7), torch.randn(2, 3, 11, 7)]
        def get_small_init_inputs():
            return [0.3]
    """,
    "mean_spatial_logsigmoid": """
        class Model(nn.Module):
            def forward(self, x):
                return F.logsigmoid(x).mean(dim=(2, 3))

        def get_inputs():
            return [torch.randn(32, 64, 56, 56)]
        def get_init_inputs():
            return []
        def get_small_inputs():
            return [torch.randn(2, 3, 5, 7)]
    """,
}


def _unseen_jobs(tasks: dict[str, str]) -> list[tuple[str, object, str]]:
    jobs = []
    for name, body in tasks.items():
        source = _HEADER + textwrap.dedent(body)
        answer = write_program(_prompt(source))
        assert answer.code is not None, f"{name}: {answer.explanation}"
        jobs.append((f"{name} [{answer.meta.family}/{answer.meta.design}]", _task(source, name), answer.code))
    return jobs


def test_unseen_kernelbench_style_tasks_verify(pool):
    _check(pool, _unseen_jobs(UNSEEN))


@pytest.mark.slow
def test_more_unseen_tasks_verify(pool):
    _check(pool, _unseen_jobs(SLOW_UNSEEN))


# ---- steps and learning ----------------------------------------------------------------------------


def test_large_and_small_steps_give_different_valid_programs(pool):
    jobs = []
    for level, name in (("level1", "09_softmax.py"), ("level2", "01_linear_bias_relu.py")):
        task = _bundled(level, name)
        first = write_program(_prompt(task.source)).code
        small = write_program(_prompt(task.source, "small_step", parent=first), seed=1).code
        large = write_program(_prompt(task.source, "large_step", parent=first)).code
        m0, ms, ml = parse_meta(first), parse_meta(small), parse_meta(large)
        assert len({first, small, large}) == 3
        assert ms.design == m0.design and ms.config != m0.config
        assert ml.design != m0.design
        # (each first program, the writer's root for the task, is judged at its own size and two others by
        # tests/kernels/test_sizes.py::test_a_sample_of_bundled_programs_holds_at_other_sizes)
        jobs += [(f"{name} small", task, small), (f"{name} large", task, large)]
    _check(pool, jobs)


def test_rules_and_cases_in_the_context_change_the_program(pool):
    from kernelwright.providers.offline.choice.variants import program_variant

    task = _bundled("level1", "11_layer_norm.py")
    plain = write_program(_prompt(task.source)).code
    default = parse_meta(plain).design
    ruled = write_program(
        _prompt(task.source, rules=f"- You cannot use design={default} for rows this long")
    ).code
    assert parse_meta(ruled).design != default
    # Not two_pass's default config (BLOCK_R=4096, BLOCK_M=1). two_pass, not welford: the judge takes ~1 s on
    # it under the interpreter, ~5 s on welford at 256 x 4 (the interpreter runs the Welford merge's tl.reduce
    # slowly); welford's chunked rows are judged by test_lane_wise_welford_is_exact_on_data_far_from_zero_...
    # and checked against float64 by test_welford_on_data_far_from_zero_is_as_accurate_as_torch.
    case = (
        '<case id="c7" outcome="effective" speedup="1.90" hardware="NVIDIA H200" same_hardware="true">\n'
        "task: another_layer_norm (norm; in 4096x4096; float32)\n"
        "design: kernelwright: family=norm design=two_pass config=BLOCK_R=256,BLOCK_M=4,num_warps=4\n</case>"
    )
    learned = write_program(_prompt(task.source, experience=case)).code
    meta = parse_meta(learned)
    assert meta.design == "two_pass" and meta.config["BLOCK_R"] == "256" and meta.config["BLOCK_M"] == "4"
    own = parse_meta(program_variant(task.source, task.name, "two_pass").code).config  # without the case
    assert (own["BLOCK_R"], own["BLOCK_M"]) != ("256", "4"), own
    _check(pool, [("rule", task, ruled), ("case", task, learned)])


@pytest.mark.slow
def test_every_bundled_task_verifies(pool):
    jobs = []
    for level in ("level1", "level2"):
        for path in sorted(bundled_suite_dir(level).glob("*.py")):  # type: ignore[arg-type]
            task = load_task(path)
            answer = write_program(_prompt(task.source))
            assert answer.code is not None, f"{path.name}: {answer.explanation}"
            jobs.append((path.name, task, answer.code))
    _check(pool, jobs)


@pytest.mark.slow
def test_every_design_of_every_bundled_task_verifies(pool):
    """Walk each task's design space by large steps (each excludes the designs already written)."""
    jobs = []
    for level in ("level1", "level2"):
        for path in sorted(bundled_suite_dir(level).glob("*.py")):  # type: ignore[arg-type]
            task = load_task(path)
            code = write_program(_prompt(task.source)).code
            shown: list[str] = []
            while code is not None and code not in shown:
                shown.append(code)
                designs = "\n".join(f'<design id="d{i}">\n{c}\n</design>' for i, c in enumerate(shown))
                jobs.append((f"{path.name} [{parse_meta(code).design}]", task, code))
                code = write_program(_prompt(task.source, "large_step", parent=code, designs=designs)).code
                if parse_meta(code).design in {parse_meta(c).design for c in shown}:
                    break
    _check(pool, jobs)


CUDNN_BIAS_TASKS = [
    "09_conv2d_bias_relu.py",  # conv2d + bias, then relu
    "27_conv1d_gelu_max_over_length.py",  # conv1d + bias, then a reduction
    "28_convtranspose2d_bias_clamp_scale_clamp_divide.py",  # transposed conv + bias
    "25_conv2d_grouped_stride2_instancenorm_leakyrelu_sum.py",  # other channel count at the small size
]


@pytest.mark.slow  # ~4.5 s under the interpreter
def test_a_kept_convolution_leaves_its_bias_to_the_triton_kernel(pool, monkeypatch):
    """The generic writer keeps a convolution as a torch call without its bias (PyTorch would add it in
    a separate pass over the output) and adds the bias in the Triton kernel that follows."""
    from kernelwright.providers.offline import plugins

    monkeypatch.setattr(plugins, "TASK_WRITERS", ())  # only the generic writer: cuDNN + Triton
    jobs = []
    for name in CUDNN_BIAS_TASKS:
        task = _bundled("level2", name)
        code = write_program(_prompt(task.source)).code
        assert code is not None, name
        call = next(
            line for line in code.splitlines() if "torch.nn.functional.conv" in line or "aten.conv" in line
        )
        assert ", None," in call, f"{name}: the bias is still passed to the convolution: {call.strip()}"
        jobs.append((name, task, code))
    _check(pool, jobs)


PERSIST_TASKS = [
    ("level2", "04_layernorm_gelu.py", "norm"),
    ("level2", "05_rmsnorm_silu_gate.py", "norm"),
    ("level1", "09_softmax.py", "softmax"),
    ("level1", "25_argmin_last_dim.py", "reduction"),
]
PERSIST_CONFIGS = ("TILE=4096,RMAX=16384,num_warps=0,PERSIST=2", "TILE=1024,RMAX=4096,num_warps=4,PERSIST=4")


def test_persistent_row_programs_verify(pool):
    """PERSIST=k: a few programs per SM walk the row blocks, in one pass (SINGLE) or a loop per row."""
    jobs = []
    for level, name, family in PERSIST_TASKS:
        task = _bundled(level, name)
        for cfg in PERSIST_CONFIGS:
            case = (
                '<case outcome="effective" speedup="2.0" same_hardware="yes">\n'
                f"design: kernelwright: family={family} design=row_registers config={cfg}\n</case>"
            )
            code = write_program(_prompt(task.source, experience=case)).code
            assert code is not None and "PERSIST=" in code.splitlines()[0], name
            assert "tl.num_programs(0)" in code, name
            jobs.append((f"{name} [{cfg}]", task, code))
    _check(pool, jobs)


LONG_ROWS = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln = nn.LayerNorm(dim)

    def forward(self, x):
        return F.gelu(self.ln(x))


def get_inputs():
    return [torch.randn(5, 4099)]


def get_init_inputs():
    return [4099]
"""


def test_persistent_row_programs_loop_over_rows_longer_than_rmax(pool):
    task = _task(LONG_ROWS, "long_rows")
    case = (
        '<case outcome="effective" speedup="2.0" same_hardware="yes">\n'
        "design: kernelwright: family=norm design=row_registers config=TILE=4096,RMAX=4096,num_warps=4,PERSIST=2"
        "\n</case>"
    )
    code = write_program(_prompt(task.source, experience=case)).code
    assert code is not None and "RMAX=4096" in code.splitlines()[0] and "PERSIST=2" in code.splitlines()[0]
    assert "single = npow <= 4096" in code  # 4099 > 4096: the looped branch runs
    _check(pool, [("long rows, persistent, looped", task, code)])


def test_persistent_whole_row_programs_load_row_invariant_operands_once_per_program():
    """PERSIST with the row in registers: the norm's weight and bias (they vary only along the row) are
    loaded before the walk over row blocks, not once per row, and the program still verifies (judged with the
    other persistent programs)."""
    task = _bundled("level2", "04_layernorm_gelu.py")
    config = "TILE=4096,RMAX=16384,num_warps=0,PERSIST=2"
    case = (
        '<case outcome="effective" speedup="2.0" same_hardware="yes">\n'
        f"design: kernelwright: family=norm design=row_registers config={config}\n</case>"
    )
    code = write_program(_prompt(task.source, experience=case)).code
    assert code is not None
    single = code[code.index("if SINGLE:") : code.index("else:", code.index("if SINGLE:"))]
    walk = single.index("for rb in range(")
    assert single[:walk].count("mask=rmask, other=0)") == 2  # weight and bias, before the walk
    assert single[walk:].count("tl.load(") == 1  # only x inside it
    # the same program (task, case and config) is judged by test_persistent_row_programs_verify
    assert ("level2", "04_layernorm_gelu.py", "norm") in PERSIST_TASKS and config in PERSIST_CONFIGS


@pytest.mark.parametrize(
    "level,name",
    [
        pytest.param("level2", "04_layernorm_gelu.py", marks=pytest.mark.slow),  # 29 programs, ~35 s
        # 24 programs, ~10 s; softmax's row designs stay in the default run through the persistent-row,
        # step and family tests above, the grid itself through the reduction below
        pytest.param("level1", "09_softmax.py", marks=pytest.mark.slow),
        ("level2", "07_sum_middle_tanh.py"),
    ],
)
def test_every_program_of_the_row_design_grid_verifies(pool, level, name):
    """The sweep grid of a whole-row kernel (designs x warps, rows per program, persistent programs):
    each entry is a distinct program and matches the reference at small odd shapes."""
    from kernelwright.providers.offline.choice.variants import design_grid, program_variant

    task = _bundled(level, name)
    grid = design_grid(task.source, task.name)
    assert len(grid) >= 5 and len({v.label() for v in grid}) == len(grid)
    jobs = []
    codes = set()
    for v in grid:
        code = program_variant(task.source, task.name, v.design, v.config).code
        assert code is not None
        codes.add(code.split("\n", 1)[1])  # the header names the config; the programs must differ too
        jobs.append((f"{name} {v.label()}", task, code))
    assert len(codes) == len(grid)
    _check(pool, jobs)


def _one_layer(layer: str, size: int, inputs: str) -> str:
    """A task applying `layer(size)` (an nn module) to `inputs`."""
    return f"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.layer = {layer}(size)

    def forward(self, x):
        return self.layer(x)


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return [{size}]
"""


# Data far from zero, where a sum-of-squares variance loses every digit.
OFFSET_LAYER_NORM = _one_layer("nn.LayerNorm", 1031, "torch.randn(7, 1031) + 300.0")

OFFSET_MIDDLE_VARIANCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, y):
        return ((y - y.mean(dim=1, keepdim=True)) ** 2).mean(dim=1)


def get_inputs():
    return [torch.randn(3, 523, 37) + 300.0]


def get_init_inputs():
    return []
"""


OFFSET_BATCH_NORM = _one_layer("nn.BatchNorm2d", 3, "torch.randn(2, 3, 9, 11) * 2.0 - 300.0")


@pytest.mark.parametrize(
    "source,design,cfg",
    [
        # these two are the default suite's in the accuracy test below (against float64, stricter)
        pytest.param(OFFSET_LAYER_NORM, "welford", {"BLOCK_R": 128, "BLOCK_M": 2}, marks=pytest.mark.slow),
        pytest.param(OFFSET_LAYER_NORM, "welford", {"BLOCK_R": 512, "BLOCK_M": 1}, marks=pytest.mark.slow),
        pytest.param(
            OFFSET_MIDDLE_VARIANCE, "online", {"BLOCK_R": 32, "BLOCK_I": 16}, marks=pytest.mark.slow
        ),
        # batch norm's statistics over batch and plane (the row's first index is the batch's) in 32-wide
        # chunks: the chunk loop's variable was named like that index, which replaced it inside the loop, and
        # every chunk's Welford step weighed 1 (level3/27's RegNet and 10/15/16/26 on a GPU, where the
        # published sizes take more than one chunk)
        (OFFSET_BATCH_NORM, "welford", {"BLOCK_R": 32, "BLOCK_M": 1}),
        # Split over programs (the interpreter counts 4 SMs): 3 programs per row, the last one's last
        # chunk ragged; each program's Welford partials merged by the combine kernel. Batch norm's
        # statistics (over batch and plane) are the next test's.
        # (the default suite covers the merged split through batch norm, in the next test)
        pytest.param(OFFSET_LAYER_NORM, "split", {"BLOCK_R": 128, "WAVES": 8}, marks=pytest.mark.slow),
        # ~15 s: the interpreter runs tl.reduce with a combine function slowly
        pytest.param(
            OFFSET_MIDDLE_VARIANCE,
            "split",
            {"BLOCK_R": 16, "BLOCK_I": 16, "WAVES": 8},
            marks=pytest.mark.slow,
        ),
    ],
)
def test_lane_wise_welford_is_exact_on_data_far_from_zero_with_ragged_chunks(pool, source, design, cfg):
    """One-pass mean and variance keep a running mean and squared-deviation sum per lane and merge the
    lanes at the end; rows that are not a multiple of the chunk (1031, 523) leave lanes with fewer
    elements. Over rows (layer norm) and over a middle dim (a variance written out), in one program per
    row or split over several."""
    from kernelwright.providers.offline.choice.variants import program_variant

    task = _task(source, "offset_" + design)
    code = program_variant(task.source, task.name, design, cfg).code
    assert code is not None and "_kw_welford_combine" in code
    _check(pool, [(f"{design} {cfg}", task, code)])


# Welford programs and their torch references against float64 on a few seeded inputs; prints each case's
# worst errors (program, torch) on a line. Run after a line that sets ROOT (the repository), FOLDER (for the
# programs) and CASES (a list of (task source, program)). The test writes the programs: loading a task there
# would start a task loader of its own (~2 s of CPU), and the programs are the same in either process.
WELFORD_ACCURACY = """
import sys, textwrap
from pathlib import Path
sys.path.insert(0, ROOT)
import torch
from tests.fakes.writer import import_program

folder = Path(FOLDER)
for i, (source, code) in enumerate(CASES):
    module = import_program(code, folder / f"program{i}.py")
    ns = {}
    exec(textwrap.dedent(source), ns)
    ref, new = ns["Model"](*ns["get_init_inputs"]()), module.ModelNew(*ns["get_init_inputs"]())
    err = torch_err = 0.0
    for seed in range(3):
        torch.manual_seed(seed)
        inputs = ns["get_inputs"]()
        with torch.no_grad():
            exact = ref.double()(*[x.double() for x in inputs])
            err = max(err, (new(*inputs).double() - exact).abs().max().item())
            torch_err = max(torch_err, (ref.float()(*inputs).double() - exact).abs().max().item())
    print(err, torch_err)
"""


@pytest.mark.slow  # ~7 s; the lane-wise Welford's exactness far from zero stays in the default suite (the test above)
def test_welford_on_data_far_from_zero_is_as_accurate_as_torch(tmp_path):
    """Rows near 300: each lane's running mean is kept about a pivot (its first value), so neither the
    per-chunk updates nor the merge of 128 lanes round by ulp(300) (which made a layer norm's error three
    times torch's, and failed the judge's allowance on one seed in a thousand)."""
    from pathlib import Path

    cases = [  # (source, design, config, the program's error at most this times torch's)
        (OFFSET_LAYER_NORM, "welford", {"BLOCK_R": 128, "BLOCK_M": 2}, 1.5),  # 3.5x torch's before
        # variances near 1: torch's error is 1-2 ulp (60x before)
        (OFFSET_MIDDLE_VARIANCE, "online", {"BLOCK_R": 32, "BLOCK_I": 16}, 3.0),
    ]
    from kernelwright.providers.offline.choice.variants import program_variant

    programs = []
    for source, design, cfg, _ in cases:
        task = _task(source, "offset_" + design)
        code = program_variant(task.source, task.name, design, cfg).code
        assert code is not None and "_kw_welford_combine" in code
        programs.append((source, code))
    root = str(Path(__file__).resolve().parents[2])
    given = f"ROOT, FOLDER, CASES = {root!r}, {str(tmp_path)!r}, {programs!r}\n"
    lines = run_interpreted(given + WELFORD_ACCURACY, timeout=300)
    errors = [tuple(float(v) for v in line.split()) for line in lines]
    assert len(errors) == len(cases), lines
    for (_, design, _, factor), (err, torch_err) in zip(cases, errors, strict=True):
        assert err <= factor * torch_err, (design, err, torch_err)


def test_split_norms_read_their_input_twice_unless_told_to_pass_per_level(pool):
    """The split design computes a norm's mean and variance in one pass over the input (then writes):
    one partials kernel. MERGE=0 keeps a pass per level (mean, then the variance around it): two. All
    verify on data far from zero, the write pass in its own grid too."""
    from kernelwright.providers.offline.choice.variants import program_variant

    task = _task(OFFSET_BATCH_NORM, "offset_bn_split")
    jobs = []
    # WRITE_CHUNKS=1: the write pass in one-chunk programs of its own grid
    for merge, passes, write in ((1, 1, 1), (0, 2, 0)):
        # 198 elements per channel in 32-wide chunks: 2 programs of 4 chunks (the last one past the row)
        config = {"BLOCK_R": 32, "WAVES": 2, "MERGE": merge, "WRITE_CHUNKS": write}
        code = program_variant(task.source, task.name, "split", config).code
        assert code is not None
        kernels = re.findall(r"^def (\w+_p\d+)\(", code, flags=re.M)
        assert len(kernels) == passes, (merge, kernels)
        assert ("_kw_welford_combine" in code) == (merge == 1)
        assert ("SPLIT_W" in code) == (write == 1)
        jobs.append((f"split {config}", task, code))
    _check(pool, jobs)


# _kw_gelu run by the interpreter over a dense grid, against float64 and against torch's own fp32 GELU.
GELU_ACCURACY = """
import torch, triton
import triton.language as tl
from kernelwright.providers.offline.emit.emit import HELPERS
exec(compile(HELPERS["_kw_gelu"], "_kw_gelu.py", "exec"))


@triton.jit
def apply(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, _kw_gelu(tl.load(x_ptr + i, mask=i < n)), mask=i < n)


x = torch.linspace(-40.0, 40.0, 400_001)
y = torch.empty_like(x)
apply[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
exact = torch.nn.functional.gelu(x.double())
err = (y.double() - exact).abs()
torch_err = (torch.nn.functional.gelu(x).double() - exact).abs()
print(err.max().item(), torch_err.max().item(), (err / x.double().abs().clamp_min(1.0)).max().item())
"""


def test_the_polynomial_gelu_is_as_accurate_as_torchs_fp32_gelu():
    """GELU is x * Phi(x) with Phi from a fitted polynomial and one exp2 (half the instructions of the
    erf formula). Its error must stay at fp32 rounding level everywhere, the saturated tails included."""
    (line,) = run_interpreted(GELU_ACCURACY, timeout=300)
    err, torch_err, relative = (float(v) for v in line.split())
    assert err <= 1.5 * torch_err and relative < 3e-7, (err, torch_err, relative)


WIDE_LAYER_NORM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return self.norm(x)

def get_inputs():
    return [torch.randn(3, {dim}) * 2 + 7]
def get_init_inputs():
    return [{dim}]
def get_small_inputs():
    return [torch.randn(2, 37) * 2 + 7]
def get_small_init_inputs():
    return [37]
"""


def test_a_wide_norm_row_mostly_padding_takes_the_hinted_fallback_and_a_fuller_one_stays_in_registers(pool):
    """A norm's row in registers is padded to a power of two; past 8192, a row under three quarters of it
    (9000 of 16384) runs the looped fallback in 4096-wide chunks with 16 warps and eviction hints, and one of
    12300 stays one load. Both written at their own size and verified (the judge's second shape is small)."""
    from kernelwright.providers.offline.kinds.row_plan import RowConfig, registers_rows_launch

    jobs = []
    for dim, single in ((9000, False), (12300, True)):
        task = _task(WIDE_LAYER_NORM.replace("{dim}", str(dim)), f"wide_layer_norm_{dim}")
        answer = write_program(_prompt(task.source))
        assert answer.code is not None and answer.meta is not None, answer.explanation
        assert answer.meta.design == "row_registers", answer.meta
        launch_single, _, _, warps = registers_rows_launch(RowConfig(**answer.meta.config), 3, dim)
        assert (launch_single, warps) == (single, 16)
        assert "single = npow <= 16384 and (npow <= 8192 or 4 * NR >= 3 * npow)" in answer.code
        assert "if single else 16" in answer.code and 'eviction_policy="evict_last"' in answer.code
        jobs.append((f"layer norm over rows of {dim}", task, answer.code))
    _check(pool, jobs)
