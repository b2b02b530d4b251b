"""What a candidate is verified on, and how much of the device judging a task takes.

The shapes: the task's own inputs and a second shape (its small inputs, the task at other sizes, or its
inputs sliced), chosen per device (`verified_shapes`); the reference's parameters perturbed so a kernel
that ignores one fails (`perturb_`). The memory bound: what judging a task holds on the GPU
(`held_bytes`, `needed_bytes`), when a task is judged lean (LEAN_BYTES) and whether a lean task still
gets its float64 reference (`lean_float64_fits`); benchmarks/judge_memory.py measures them.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from typing import Any

from kernelwright.hardware.config import EvalConfig
from kernelwright.hardware.judge.records import Shape, TaskState
from kernelwright.hardware.judge.tensors import clone, tensors_of
from kernelwright.tasks.resize import CPU_PRIMARY_ELEMENTS, CPU_SECOND_ELEMENTS

LEAN_BYTES = 1 << 30
"""Tasks whose own tensors take more than this are judged lean (see ReferenceCache.fits)."""

CONTEXT_BYTES = 1 << 30
"""Beside a task's own tensors: CUDA contexts, L2-flush buffers and the allocator's slack."""

_PERTURB_SEED_OFFSET = 104729


@dataclass
class JobSeeds:
    """The seeds one job draws its inputs from: one per trial per shape, one for the re-check after
    timing, one for the perturbation of the parameters. Drawn from the OS for every job (never from the configured seed, never reused), so a candidate
    can neither know them nor reproduce its inputs; the result lists them once the verdict is in
    (`as_json`), and `EvalConfig.input_seeds` replays them."""

    trials: dict[str, list[int]]
    """Per shape label, one seed per trial."""
    recheck: int
    parameters: int
    """The perturbation of the reference's parameters and buffers (perturb_), so a candidate cannot
    reproduce the values it is loaded with either (and derive them in __init__)."""

    def as_json(self) -> dict[str, list[int]]:
        return {**{label: list(seeds) for label, seeds in self.trials.items()}, "recheck": [self.recheck],
                "parameters": [self.parameters]}  # fmt: skip


def _fresh_seed() -> int:
    return secrets.randbits(63)


def draw_seeds(shapes: list[Shape], cfg: EvalConfig) -> JobSeeds:
    """Seeds for one job's inputs (see JobSeeds): `cfg.input_seeds` where it names them (a replay), fresh
    from the OS otherwise."""
    given = cfg.input_seeds or {}

    def seeds(label: str, n: int) -> list[int]:
        replay = [int(x) for x in given.get(label, [])][:n]
        return replay + [_fresh_seed() for _ in range(n - len(replay))]

    trials = {s.label: seeds(s.label, trial_count(cfg, s is shapes[0])) for s in shapes}
    return JobSeeds(trials, seeds("recheck", 1)[0], seeds("parameters", 1)[0])


def trial_count(cfg: EvalConfig, primary: bool) -> int:
    """Verification trials on the primary shape (`cfg.trials`) or on the second one."""
    return cfg.trials if primary else min(cfg.trials, cfg.second_shape_trials)


def held_bytes(fp: Any) -> int:
    """What judging a task (footprint `fp`, a tasks.resize.Footprint) holds while a candidate runs: about 2x
    the inputs (pristine and the lent copy), 3x the outputs (expected, the lent output buffer and the
    candidate's own) and 2x the parameters (the reference's and the candidate's)."""
    return 2 * fp.inputs + 3 * fp.outputs + 2 * fp.parameters


def needed_bytes(fp: Any) -> int:
    """The device memory judging a task needs: what it holds, plus CONTEXT_BYTES."""
    return held_bytes(fp) + CONTEXT_BYTES


def lean_float64_fits(fp: Any, free: int) -> bool:
    """Whether a lean task (footprint `fp`, a tasks.resize.Footprint) still gets its float64 reference: when
    the float64 run and what judging then holds fit the free device memory, with CONTEXT_BYTES to spare.

    Long accumulations need it: a fp32 matmul with K = 524288 (256 x 256 output) differs from the fp32
    reference by ~0.02, so against that reference alone an honest split-K kernel was rejected. So do large
    elementwise outputs of exponentials: Mamba2's segment sums (level3/48, outputs ~1e19) put 6 of 134M
    elements of an honest kernel past the fp32 reference's tolerance. A lean task holds about 2x inputs + 3x
    outputs + 2x parameters while a candidate runs (held_bytes); the float64 run needs the fp32 tensors and
    their float64 copies and output at its peak, and its output is kept for the comparisons.
    A bf16/fp16 task's float64 copies are 4x its bytes, not 2x: the same rule with the float64 sizes.
    """
    in64, out64, par64 = fp.as_float64  # 2x fp32 bytes; 4x bf16/fp16 ones
    held = held_bytes(fp) + out64  # the float64 output is kept for the comparisons
    peak = max(fp.total + in64 + out64 + par64, held) + CONTEXT_BYTES
    return peak <= free


def verified_shapes(task: TaskState, cfg: EvalConfig, device: str) -> list[Shape]:
    """The shapes verified here: the primary one, then a second one (see the module docstring)."""
    from kernelwright.tasks import exec_task_module, has_small_inputs
    from kernelwright.tasks.resize import first_input_shapes, footprint, shrink

    key = (device == "cuda", cfg.second_shape)
    if key in task.shapes:
        return task.shapes[key]
    module, source = task.module, task.module.__dict__["__kw_source__"]
    has_small = has_small_inputs(module)

    def derived(budget: int, avoid: list[list[int]] | None) -> Shape | None:
        for b in (budget, budget // 4, budget * 4):
            resized = shrink(source, f"{task.name}_resized", max(b, 16))
            if resized is not None and resized.input_shapes != avoid:
                return Shape("derived", exec_task_module(resized.source, f"{task.name}_resized"), False,
                              note=f"sizes {resized.description}")  # fmt: skip
        return None

    shapes: list[Shape] = []
    if device == "cuda":
        shapes.append(Shape("full", module, False))
        full = first_input_shapes(module, small=False) or []
        elements = sum(math.prod(s) for s in full)
        second = Shape("small", module, True) if has_small else derived(max(4096, elements // 8), full)
    else:
        if has_small:
            shapes.append(Shape("small", module, True))
        else:
            primary = derived(CPU_PRIMARY_ELEMENTS, None)
            shapes.append(primary if primary is not None else Shape("full", module, False))
        first = first_input_shapes(shapes[0].module, small=shapes[0].small)
        # The second shape is no larger than the first: under the interpreter it costs as much again.
        own = footprint(shapes[0].module, small=shapes[0].small)
        elements = own.total // 4 if own is not None else CPU_SECOND_ELEMENTS
        second = derived(max(1024, min(CPU_SECOND_ELEMENTS, elements)), first)
        if second is not None and shapes[0].label == "derived":
            second.label = "derived2"
    if second is None:
        second = _sliced(shapes[0], device)
    if cfg.second_shape and second is not None:
        shapes.append(second)
    task.shapes[key] = shapes
    return shapes


def _slice_inputs(inputs: list[Any], plan: list[list[tuple[int, int]]]) -> list[Any]:
    """Each tensor input i narrowed to its first `size` elements along `dim` for (dim, size) in plan[i]."""
    out = []
    for t, cuts in zip(inputs, plan, strict=True):
        if cuts and hasattr(t, "narrow"):
            for dim, size in cuts:
                t = t.narrow(dim, 0, size)
            t = t.contiguous()
        out.append(t)
    return out


def _sliced(primary: Shape, device: str) -> Shape | None:
    """A second shape for a task whose sizes are not module constants: its inputs sliced.

    A dim of the first input is cut to about 2/3 (never below 2: a size-1 dim would broadcast), and so
    is the same dim of every other input of the same rank with the same size there, so sizes that must
    agree still do (a contraction dim, a batch). Tried in turn: every dim, the last, the first; the
    first slicing the reference runs on, with an output of the same rank, is kept.
    """
    import torch

    from kernelwright.tasks import task_inputs, task_model

    try:
        inputs = task_inputs(primary.module, small=primary.small, seed=0, device=device)
        model = task_model(primary.module, small=primary.small, seed=0, device=device)
        with torch.no_grad():
            base = tensors_of(model(*clone(inputs)))
    except Exception:
        return None
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    if not tensors or tensors[0].dim() == 0:
        return None
    lead = list(tensors[0].shape)

    def cut(n: int) -> int:
        return max(2, (2 * n) // 3 - (1 if (2 * n) // 3 % 2 == 0 and n > 3 else 0))

    candidates = [[d for d, n in enumerate(lead) if n >= 3], [len(lead) - 1], [0]]
    for dims in candidates:
        dims = [d for d in dims if lead[d] >= 3]
        if not dims:
            continue
        plan = [
            [(d, cut(lead[d])) for d in dims if t.dim() == len(lead) and t.shape[d] == lead[d]]
            if isinstance(t, torch.Tensor) else []
            for t in inputs
        ]  # fmt: skip
        try:
            with torch.no_grad():
                out = tensors_of(model(*_slice_inputs(inputs, plan)))
        except Exception:
            continue
        if [o.dim() for o in out] != [o.dim() for o in base]:
            continue
        first = next(i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor))
        shape_text = "x".join(str(n) for n in _slice_inputs([inputs[first]], [plan[first]])[0].shape)
        return Shape("sliced", primary.module, primary.small, note=f"{primary.label} inputs sliced to {shape_text}",
                      transform=lambda xs, plan=plan: _slice_inputs(xs, plan))  # fmt: skip
    return None


def perturb_(model: Any, seed: int) -> int:
    """Perturb a model's floating parameters and persistent buffers in place, deterministically; how many
    changed. Non-persistent buffers (tables computed in __init__, such as rotary embeddings' cos/sin) are left
    as built: they are not in the state_dict, so the candidate, given the state_dict, builds its own.

    All-zero tensors (biases, running means) get small random values; tensors with no negative value
    (norm weights, running variances) are scaled by exp(0.3 * N(0,1)), staying positive; the rest move by
    a tenth of their spread. Integer buffers (num_batches_tracked) are left alone.
    """
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed + _PERTURB_SEED_OFFSET)
    changed = 0
    with torch.no_grad():
        persistent = {id(t) for t in model.state_dict(keep_vars=True).values()}
        tensors = [t for _, t in model.named_parameters()]
        tensors += [t for _, t in model.named_buffers() if id(t) in persistent]
        for t in tensors:
            if not t.is_floating_point() or t.numel() == 0:
                continue
            noise = torch.randn(t.shape, generator=g, dtype=torch.float32).to(device=t.device, dtype=t.dtype)
            if bool((t == 0).all()):
                t.add_(0.1 * noise)
            elif bool((t >= 0).all()):
                t.mul_(torch.exp(0.3 * noise.clamp(-3, 3)))
            else:
                spread = float(t.float().std()) if t.numel() > 1 else float(t.abs().max())
                t.add_((0.1 * (spread or 1.0)) * noise)
            changed += 1
    return changed
