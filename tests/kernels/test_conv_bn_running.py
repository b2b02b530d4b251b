"""A conv program's train-mode BatchNorm under the interpreter: the statistics kernel also moves the running
statistics and the batch count (no launch of their own) where the module has a momentum, and a module whose
momentum is None (a cumulative average) takes the update kernel after it; both match PyTorch's buffers over
two forwards, in fp32 and with a bf16 module. Two samples of two channels: each forward runs a depthwise plane
per sample and channel under the interpreter, eight forwards in all (at three of three they took 4.8 s)."""

from __future__ import annotations

import textwrap

from tests.fakes.writer import run_interpreted

PROGRAM = textwrap.dedent(
    """
    import importlib.util, pathlib, tempfile, textwrap
    import torch
    from kernelwright.providers.offline.families.conv.conv import analyze_conv_task, default_conv_config, emit_conv_program
    from kernelwright.tasks.module import exec_task_module

    SOURCE = '''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 2, 3, padding=1, groups=2, bias=False)
            self.bn = nn.BatchNorm2d(2)
            nn.init.normal_(self.bn.weight)

        def forward(self, x):
            return F.relu6(self.bn(self.conv(x)))


    def get_inputs():
        return [torch.randn(2, 2, 7, 9)]


    def get_init_inputs():
        return []
    '''
    SOURCE = textwrap.dedent(SOURCE)
    plan = analyze_conv_task(SOURCE).plan
    design = "direct_depthwise"
    text = emit_conv_program(plan, SOURCE, design=design, config=default_conv_config(design, plan, "strict"))
    path = pathlib.Path(tempfile.mkdtemp()) / "bn_running_program.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    updates = []

    class Counted:  # the update kernel as the helper looks it up, counting its launches
        def __getitem__(self, grid):
            updates.append(grid)
            return kernel[grid]

    kernel, program._kw_bn_update_kernel = program._kw_bn_update_kernel, Counted()
    task = exec_task_module(SOURCE, "bn_running_task")
    for dtype in (torch.float32, torch.bfloat16):
        for momentum in (0.3, None):
            torch.manual_seed(0)
            ref = task.Model().to(dtype)
            new = program.ModelNew().to(dtype)
            new.load_state_dict(ref.state_dict())
            ref.bn.momentum = new.bn.momentum = momentum
            ref.bn.running_mean.normal_()
            new.bn.running_mean.copy_(ref.bn.running_mean)
            updates.clear()
            worst = 0.0
            for step in range(2):
                x = torch.randn(2, 2, 7, 9).to(dtype)
                y, want = new(x), ref(x)
                worst = max(worst, (y.float() - want.float()).abs().max().item())
            for name in ("running_mean", "running_var"):
                got, exp = getattr(new.bn, name).float(), getattr(ref.bn, name).float()
                worst = max(worst, ((got - exp).abs() / (exp.abs() + 1)).max().item())
            print(f"{str(dtype)[6:]} {momentum} | {worst:.3g} {int(new.bn.num_batches_tracked)} {len(updates)}")
    """
)


def _run() -> dict[str, tuple[float, int, int]]:
    rows = {}
    for line in run_interpreted(PROGRAM, timeout=240):
        case, values = line.split(" | ")
        worst, batches, updates = values.split()
        rows[case] = (float(worst), int(batches), int(updates))
    return rows


def test_running_statistics_follow_pytorch_with_and_without_a_momentum():
    rows = _run()
    assert set(rows) == {"float32 0.3", "float32 None", "bfloat16 0.3", "bfloat16 None"}, rows
    for case, (worst, batches, updates) in rows.items():
        tol = 1e-4 if case.startswith("float32") else 0.05  # a bf16 running statistic holds 8 bits
        assert worst <= tol, (case, worst)
        assert batches == 2, (case, batches)
        # with a momentum the statistics kernel updates them: no launch of the update kernel
        assert updates == (2 if case.endswith("None") else 0), (case, updates)
