"""Pieces the per-task benchmark scripts share (a CUDA-event timer: ceilings.py, pool_sweep.py, probes/timing_spread.py; a program loaded
from its file: pool_sweep.py, probes/norm_probe.py, probes/host_overhead.py, probes/conv_half_probe.py; an error over the
reference's RMS: probes/conv_half_probe.py, probes/conv_tma_probe.py, probes/fp32_gemm_paths.py; conv_bench.py, design_sweep.py, inductor_code.py,
probes/norm_probe.py; the offline writer's root program and suite folders, and both together in `suite_roots`:
probes/warm_replay.py, probes/host_overhead.py, compile_suite.py, probes/matmul_cases.py).

Imported as `_common`: a script run as `python benchmarks/<name>.py` has this folder on sys.path.
"""

from __future__ import annotations

import importlib.util
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def environment(device: str) -> dict[str, Any]:
    """torch and Triton versions and the GPU's name, for a report's meta block (informative only: an
    import problem is recorded, not raised)."""
    meta: dict[str, Any] = {}
    try:
        import torch
        import triton

        meta.update(torch=torch.__version__, triton=triton.__version__)
        if device == "cuda":
            meta["gpu"] = torch.cuda.get_device_name()
    except Exception as exc:
        meta["versions_error"] = str(exc)
    return meta


def load_program(code: str, path: Path) -> Any:
    """A generated program as a module named after `path`, written there first (Triton's JIT reads a kernel's
    source from its file)."""
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cuda_models(mod: Any, program: Any, seed: int) -> tuple[Any, Any, list[Any]]:
    """The task module's Model and the program's ModelNew on the GPU with the same weights (seeded), and the
    task's inputs there: (reference, candidate, inputs)."""
    import torch

    torch.manual_seed(seed)
    ref = mod.Model(*mod.get_init_inputs()).cuda()
    new = program.ModelNew(*mod.get_init_inputs()).cuda()
    new.load_state_dict(ref.state_dict())
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in mod.get_inputs()]
    return ref, new, inputs


def max_err_over_rms(out: Any, ref: Any) -> float:
    """The largest absolute error of `out` against `ref` (tensors, compared in float64) over the reference's
    root mean square (over 1 where the reference is all zeros)."""
    ref64 = ref.double()
    rms = ref64.pow(2).mean().sqrt().item() or 1.0
    return (out.double() - ref64).abs().max().item() / rms


def cuda_event_times(
    fn: Callable[[], Any], *, warmup: int, reps: int, flush: Any = None, sync_each: bool = True
) -> list[float]:
    """Per-call times in ms with CUDA events after `warmup` untimed calls; each call timed on its own, so
    a median of them is honest (ceilings.py, pool_sweep.py). `flush`: a device buffer zeroed before each
    call (L2 flushed, outside the events). sync_each=False records every call's events and synchronizes once
    at the end, as the judge times: the host's launch work overlaps the GPU's (probes/timing_spread.py)."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    pairs = []
    for _ in range(reps):
        if flush is not None:
            flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        if sync_each:
            end.synchronize()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in pairs]


def measure_task(name: str, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """One task's entry: what `run` returns, or its error (one task's failure must not end the
    benchmark), with the wall time it took."""
    t0 = time.perf_counter()
    try:
        entry = run()
    except Exception as exc:
        entry = {"task": name, "error": "".join(traceback.format_exception_only(type(exc), exc)).strip()}
    entry["wall_s"] = round(time.perf_counter() - t0, 1)
    return entry


def task_path(spec: str) -> Path:
    """'level1/14' (or 'level1/14_matmul_square', 'published/06') -> the bundled task file; a path to a task
    file (e.g. one `kernelwright tasks generate` wrote) -> itself; a one-line SystemExit for a spec that names
    none."""
    from kernelwright.tasks import BUNDLED_SUITES, bundled_suite_dir

    if spec.strip().endswith(".py") and Path(spec.strip()).is_file():
        return Path(spec.strip())
    level, _, prefix = spec.strip().partition("/")
    if level not in BUNDLED_SUITES or not prefix:
        raise SystemExit(f"task {spec!r}: expected level1/NN, level2/NN or published/NN")
    matches = sorted(bundled_suite_dir(level).glob(f"{prefix}*.py"))  # type: ignore[arg-type]
    if not matches:
        raise SystemExit(f"task {spec!r}: no bundled task file starts with {prefix!r}")
    return matches[0]


def suite_folder(spec: str) -> Path:
    """A folder of tasks, or a bundled suite's name ("level1", "level2_bf16", ...) -> its folder."""
    from kernelwright.tasks import BUNDLED_SUITES, bundled_suite_dir

    if Path(spec).is_dir():
        return Path(spec)
    if spec not in BUNDLED_SUITES:
        raise SystemExit(f"suite {spec!r}: not a folder, and not one of {', '.join(BUNDLED_SUITES)}")
    return bundled_suite_dir(spec)  # type: ignore[arg-type]


def root_program(
    task: Any,
    target: Any,
    *,
    memory: Any = None,
    budget: int = 6000,
    precision: str = "strict",
    seed: int = 0,
    hardware: str | None = None,
) -> Any:
    """The offline writer's answer to a run's first (large) step on `task`: the prompt built as the graph's
    context node builds it (with `memory`, or none), for `target` with the GPU machine's torch and Triton."""
    from kernelwright.hardware.result import Versions
    from kernelwright.nodes.context_builder import build_context
    from kernelwright.nodes.prompts import request_text
    from kernelwright.providers.offline.writer import write_program

    bundle = build_context(
        task, "large_step", request_text=request_text("large_step"), target=target,
        hardware=hardware or target.name, versions=Versions(torch="2.11.0", triton="3.6.0"), memory=memory,
        budget=budget, precision=precision,
    )  # fmt: skip
    return write_program(bundle.prompt, seed=seed)


def suite_roots(suites: list[str], target: Any) -> Iterator[tuple[str, Path, Any]]:
    """("folder/stem", task file, the writer's root answer for `target`) for every task of the suites (bundled
    names or folders), in order."""
    from kernelwright.tasks import load_task

    for suite in suites:
        folder = suite_folder(suite)
        for path in sorted(folder.glob("[0-9]*.py")):
            yield f"{folder.name}/{path.stem}", path, root_program(load_task(path), target)


def level3_pairs(kb: str, stitched: str, numbers: list[str]) -> Iterator[tuple[Path, Path]]:
    """(the KernelBench level-3 file, its stitched model `benchmarks/level3_first_programs.py write` wrote) for
    each number given; a number without both is said on stdout and skipped."""
    import glob

    for number in numbers:
        found = glob.glob(str(Path(kb) / f"{number}_*.py"))
        made = glob.glob(str(Path(stitched) / f"{number}_*_stitched.py"))
        if not found or not made:
            print(f"{number}: no task file or no stitched file", flush=True)
            continue
        yield Path(found[0]), Path(made[0])


def warmed_forward(model: Any, inputs: list[Any], train: bool, warmup: int = 3) -> Callable[[], None]:
    """A call of `model` on `inputs` without autograd, in train or eval mode, already made `warmup` times."""
    import torch

    model.train(train)

    def call() -> None:
        with torch.no_grad():
            model(*inputs)

    for _ in range(warmup):
        call()
    return call


def replay_counts(model: Any) -> tuple[int, int]:
    """(regions whose launches a stitched model replays now, regions that may be replayed): its plans'
    LaunchReplay objects (tasks/region_runtime.py), read after its warm-up calls. Where the whole forward is
    replayed (a plan's ModelReplay holds a recipe), every replayable region counts as replayed."""
    replays = [r for plan in model.__dict__.get("_kw_plans", {}).values() for r in plan.replays.values()]
    whole = model_replayed(model)
    return sum(whole or any(isinstance(s, tuple) for s in r.seen.values()) for r in replays), len(replays)


def model_replayed(model: Any) -> bool:
    """Whether a stitched model replays its whole forward now (tasks/region_runtime.py ModelReplay)."""
    return any(isinstance(s, tuple) for plan in model.__dict__.get("_kw_plans", {}).values()
               if getattr(plan, "model_replay", None) for s in plan.model_replay.seen.values())  # fmt: skip
