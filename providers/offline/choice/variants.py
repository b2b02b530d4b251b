"""The offline writer's programs for a task at chosen designs and configs of its main kernel (for sweeps
and tests).

    answer = program_variant(source, name, "grouped", {"PREC": "tf32x3", "KMAJOR": 1, "BLOCK_K": 32})
    answer = program_variant(source, name, "row_registers", {"PERSIST": 2})
    answer = program_variant(source, name, "direct", {"BLOCK_M": 256})   # a convolution task's conv design
    for v in design_grid(source, name): ...   # a small grid of (design, config, fuse) worth measuring

The task goes through the writer's own pipeline (analysis, schedule, dual-matmul fusion, emission). The
main kernel is the task's costliest matmul kernel when it has one, else its costliest whole-row kernel
(reduction, softmax, norm, loss, scan); it gets the given design with that design's default config
updated by `config`, every other kernel its defaults (a second product that the design applies to
gets the same config). `fuse=False` writes two products that share A as two kernels (the unfused
baseline of the dual design). A convolution design (providers/offline/families/conv/conv.py) writes the task through
the conv writer, its config over that design's default for the task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelwright.providers.offline.choice.designs import (
    KernelInfo,
    default_config,
    default_design,
    find_design,
    kernel_info,
    make_config,
)
from kernelwright.providers.offline.choice.matmul_fusion import fuse_dual_matmuls
from kernelwright.providers.offline.choice.schedule import Schedule, schedule
from kernelwright.providers.offline.emit.emit_module import ProgramMeta, emit_program
from kernelwright.providers.offline.families.conv.conv import (
    ConvConfig,
    analyze_conv_task,
    conv_configs,
    conv_designs,
    emit_conv_program,
)
from kernelwright.providers.offline.families.conv.conv_stages import DESIGNS as CONV_DESIGNS
from kernelwright.providers.offline.frontend.analysis import analyze_cached
from kernelwright.providers.offline.kinds.kind_matmul import MatmulInfo
from kernelwright.providers.offline.kinds.kind_rows import RowsInfo
from kernelwright.providers.offline.writer import WriterAnswer


@dataclass(frozen=True)
class Variant:
    design: str
    config: dict[str, Any] = field(default_factory=dict, hash=False)
    fuse: bool = True

    def label(self) -> str:
        cfg = ",".join(f"{k}={v}" for k, v in self.config.items())
        return f"{self.design}{'' if self.fuse else '(unfused)'}:{cfg}"


def _plan(source: str, name: str, fuse: bool) -> tuple[Any, Schedule, dict[int, KernelInfo], int]:
    analysed = analyze_cached(source, name)
    sched = schedule(analysed.graph)
    if fuse:
        sched = fuse_dual_matmuls(sched)
    kernels = sched.triton_kernels()
    infos = {k.id: kernel_info(sched, k) for k in kernels}
    for kind in ("matmul", "rows"):
        of_kind = [k for k in kernels if infos[k.id].kind == kind]
        if of_kind:
            primary = max(of_kind, key=lambda k: (infos[k.id].cost, -k.id))
            return analysed, sched, infos, primary.id
    raise ValueError(f"{name}: no matmul or whole-row kernel")


def main_kernel_info(source: str, name: str, fuse: bool = True) -> KernelInfo:
    """The facts of the task's main kernel (its matmul, dual when fused; else its costliest row kernel)."""
    _, _, infos, primary = _plan(source, name, fuse)
    return infos[primary]


def main_matmul_info(source: str, name: str, fuse: bool = True) -> KernelInfo:
    """The facts of the task's main matmul kernel (dual when fused)."""
    info = main_kernel_info(source, name, fuse)
    if info.kind != "matmul":
        raise ValueError(f"{name}: no matmul kernel")
    return info


def program_variant(source: str, name: str, design: str, config: dict[str, Any] | None = None, *,
                    tf32: bool = False, fuse: bool = True) -> WriterAnswer:  # fmt: skip
    """The program with the main kernel written as `design` with `config` over its defaults.

    Every other kernel the design applies to (the second product when unfused) gets the same config."""
    if design in CONV_DESIGNS:
        return _conv_variant(source, name, design, config or {}, tf32)
    analysed, sched, infos, primary = _plan(source, name, fuse)
    main = infos[primary]
    d = find_design(main.family, design)
    if d is None or not d.applies(main):
        raise ValueError(f"design {design!r} does not apply to the main {main.family} kernel of {name}")
    knobs = set(vars(make_config(d, {}))) - {"mode"}  # the mode is the design's, not a knob
    _known_keys(config or {}, knobs, f"design {design!r}")
    configs = {}
    full: dict[str, Any] = {}
    for kid, info in infos.items():
        same = info.family == main.family and d.applies(info)
        dd = d if (kid == primary or same) else default_design(info)
        cfg = default_config(dd, info, tf32)
        if dd is d:
            cfg.update(config or {})
        if kid == primary:
            full = cfg
        configs[kid] = make_config(dd, cfg)
    meta = ProgramMeta(main.family, d.name, full)
    why = f"sweep: {main.family} kernel as {d.name}" + ("" if fuse else " (products unfused)")
    code = emit_program(analysed, sched, configs, meta, why + ".")
    return WriterAnswer(code, why, meta)


def _known_keys(config: dict[str, Any], known: Any, what: str) -> None:
    """A config key the design's config does not have would be dropped without a word (a typo, or a knob of
    another tree), and a sweep would time the default under its name: refuse it."""
    unknown = sorted(k for k in config if k not in known)
    if unknown:
        raise ValueError(
            f"{what} has no config keys {', '.join(unknown)} (it has: {', '.join(sorted(known))})"
        )


def _conv_variant(source: str, name: str, design: str, config: dict[str, Any], tf32: bool) -> WriterAnswer:
    analysis = analyze_conv_task(source)
    if analysis.plan is None:
        raise ValueError(f"{name}: not a convolution the conv writer supports ({analysis.reason})")
    if design not in conv_designs(analysis.plan):
        raise ValueError(
            f"conv design {design!r} does not apply to {name} ({', '.join(conv_designs(analysis.plan))})"
        )
    _known_keys(config, ConvConfig.model_fields, f"conv design {design!r}")
    precision = "tf32" if tf32 else "strict"
    base = conv_configs(design, analysis.plan, precision)[0]
    cfg = ConvConfig(**{**base.model_dump(), **config})
    code = emit_conv_program(analysis.plan, source, design=design, config=cfg, precision=precision)
    why = f"sweep: conv as {design}"
    return WriterAnswer(code, why, ProgramMeta("conv", design, cfg.model_dump()))


def _grid_single(big_prec: str, kmajor_hint: bool) -> list[Variant]:
    t = {"PREC": big_prec, "KMAJOR": 1, "BLOCK_K": 32, "num_warps": 8}
    ieee = {"PREC": "ieee", "KMAJOR": 0, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 16, "num_warps": 8}
    out = [
        Variant("grouped", {**t, "BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 3}),
        Variant("grouped", {**t, "BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 4}),
        Variant("grouped", {**t, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 16, "num_stages": 4}),
        Variant("grouped", {**t, "BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 16, "num_stages": 4}),
        Variant("grouped", {**t, "BLOCK_M": 128, "BLOCK_N": 64, "num_stages": 4}),
        Variant("persistent", {**t, "BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 3}),
        Variant("persistent", {**t, "BLOCK_M": 128, "BLOCK_N": 64, "num_stages": 4}),
        Variant("split_k", {**t, "BLOCK_M": 128, "BLOCK_N": 128, "SPLIT_K": 2, "num_stages": 3}),
        Variant("grouped", {**ieee, "num_stages": 3}),
        Variant(
            "split_k",
            {
                **ieee,
                "BLOCK_M": 64,
                "BLOCK_N": 64,
                "BLOCK_K": 32,
                "SPLIT_K": 8,
                "num_warps": 4,
                "num_stages": 3,
            },
        ),  # fmt: skip
        Variant("persistent", {**ieee, "num_stages": 3}),
    ]
    if not kmajor_hint:
        # The same tensor-core kernel reading B N-major: what the transpose copy buys.
        out.insert(5, Variant("grouped", {**t, "KMAJOR": 0, "BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 3}))
    if big_prec == "tf32x3":
        # Strict fp32 on bf16 parts (PREC=bf16x6, no K-major copy): the writer's split-K default, and tiled
        b6 = {"PREC": "bf16x6", "KMAJOR": 0, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8}
        out.insert(1, Variant("grouped", {**b6, "BLOCK_K": 64, "num_stages": 3}))
        out.append(Variant("split_k", {**b6, "BLOCK_K": 32, "SPLIT_K": 8, "num_stages": 4}))
    return out


def _grid_dual(big_prec: str) -> list[Variant]:
    t = {"PREC": big_prec, "KMAJOR": 1, "BLOCK_K": 32}
    return [
        Variant("dual", {**t, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3}),
        Variant("dual", {**t, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 4}),
        Variant(
            "dual", {**t, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 16, "num_warps": 8, "num_stages": 4}
        ),
        Variant("dual", {**t, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}),
        Variant("dual", {**t, "BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 4}),
        Variant("dual", {**t, "BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 16, "num_warps": 8, "num_stages": 4}),
        Variant("dual_persistent", {**t, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3}),
        Variant("dual_persistent", {**t, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 4}),
        Variant(
            "dual",
            {
                "PREC": "ieee",
                "KMAJOR": 0,
                "BLOCK_M": 128,
                "BLOCK_N": 64,
                "BLOCK_K": 16,
                "num_warps": 8,
                "num_stages": 3,
            },
        ),  # fmt: skip
        Variant(
            "grouped", {**t, "BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, fuse=False
        ),
        Variant("grouped", {**t, "BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 4}, fuse=False),
    ]


def _grid_rows(info: RowsInfo) -> list[Variant]:
    """Whole-row kernels: the register design's launch shapes (warps, rows per program, persistent
    programs) and the looped designs."""
    if info.layout == "cols":
        return [
            Variant("row_registers", {"BLOCK_I": 64, "num_warps": 8}),
            Variant("row_registers", {"BLOCK_I": 256, "num_warps": 8}),
            Variant("row_registers", {"BLOCK_I": 32, "num_warps": 4}),
            Variant("two_pass", {}),
            Variant("looped", {}),
            Variant("split", {}),
            Variant("split", {"MERGE": 0}),
        ]
    return [
        Variant("row_registers", {"num_warps": 8}),
        Variant("row_registers", {"num_warps": 32}),
        Variant("row_registers", {"PRELOAD": 0}),
        Variant("row_registers", {"PRELOAD": 1}),
        Variant("row_registers", {"PRELOAD": 1, "num_warps": 32}),
        Variant("row_registers", {"STATIC": 1}),
        Variant("row_registers", {"STATIC": 1, "num_warps": 32}),
        Variant("row_registers", {"STATIC": 1, "PRELOAD": 0}),
        Variant("row_registers", {"STATIC": 1, "PRELOAD": 1}),
        Variant("row_registers", {"STATIC": 1, "num_warps": 16}),
        Variant("row_registers", {"STATIC": 1, "num_warps": 8}),
        Variant("row_registers", {"TILE": 16384, "num_warps": 32}),
        Variant("row_prefetch", {}),
        Variant("row_prefetch", {"num_warps": 16}),
        Variant("row_registers", {"PERSIST": 1, "num_warps": 32}),
        Variant("row_registers", {"PERSIST": 1, "num_warps": 16}),
        Variant("row_registers", {"PERSIST": 1, "num_warps": 32, "STATIC": 1}),
        Variant("row_registers", {"PERSIST": 2, "num_warps": 32}),
        Variant("two_pass", {}),
        Variant("two_pass", {"num_warps": 8, "STATIC": 0}),  # the default over long rows before run 16
        Variant("two_pass", {"BLOCK_R": 8192, "num_warps": 16}),
        Variant("two_pass", {"BLOCK_R": 2048, "num_warps": 8, "STATIC": 1}),
        Variant("two_pass", {"BLOCK_R": 4096, "num_warps": 16, "STATIC": 1}),
        Variant("two_pass", {"BLOCK_R": 8192, "num_warps": 16, "STATIC": 1}),
        Variant("two_pass", {"BLOCK_R": 4096, "num_warps": 8, "STATIC": 1}),
        Variant("two_pass", {"BLOCK_R": 2048, "num_warps": 16, "STATIC": 1}),
        Variant("two_pass", {"BLOCK_R": 4096, "num_warps": 32, "STATIC": 1}),
        Variant("two_pass", {"BLOCK_R": 4096, "num_warps": 16, "STATIC": 1, "EVICT": 0}),
        Variant("welford", {}),
        Variant("welford", {"BLOCK_R": 2048, "num_warps": 8}),
        Variant("welford", {"BLOCK_R": 2048, "num_warps": 8, "STATIC": 1}),
        Variant("welford", {"BLOCK_R": 4096, "num_warps": 16, "STATIC": 1}),
        Variant("welford", {"BLOCK_R": 2048, "num_warps": 16, "STATIC": 1}),
        Variant("welford", {"BLOCK_R": 4096, "num_warps": 16, "STATIC": 1, "EVICT": 0}),
        Variant("welford", {"BLOCK_R": 4096, "num_warps": 16}),
        Variant("welford", {"BLOCK_R": 1024, "num_warps": 4}),
        Variant("online", {}),
        Variant("online", {"BLOCK_R": 2048, "num_warps": 8}),
        Variant("looped", {}),
        Variant("split", {}),
        Variant("split", {"MERGE": 0}),  # a pass per level: mean, then the variance around it
        Variant("split", {"WAVES": 8}),
        Variant("split", {"WAVES": 2}),
        Variant("split", {"BLOCK_R": 8192, "num_warps": 16}),
        Variant("split", {"BLOCK_R": 2048}),
    ]


def design_grid(source: str, name: str, *, tf32: bool = False, limit: int | None = None) -> list[Variant]:
    """A small grid of designs x configs worth measuring for the task's main kernel (first: the writer's
    default). `tf32` uses PREC=tf32 for the matmul tensor-core entries instead of tf32x3. Entries whose
    design does not apply to the kernel, and repeats, are left out."""
    info = main_kernel_info(source, name)
    if isinstance(info, MatmulInfo):
        unfused = main_kernel_info(source, name, fuse=False) if info.dual else info
        prec = "tf32" if tf32 else "tf32x3"
        grid = _grid_dual(prec) if info.dual else _grid_single(prec, info.b_kmajor)
    else:
        unfused = info
        grid = _grid_rows(info) if isinstance(info, RowsInfo) else []  # a pointwise kernel: its default
    d = default_design(info)
    out = [Variant(d.name, default_config(d, info, tf32))]
    for v in grid:
        on = info if v.fuse else unfused
        dv = find_design(on.family, v.design)
        if dv is None or not dv.applies(on):
            continue
        # The full config (the design's defaults under the entry's keys): duplicates show, labels compare.
        cfg = {**default_config(dv, on, tf32), **v.config}
        if isinstance(on, MatmulInfo) and not on.fp32_dot:
            cfg = {k: x for k, x in cfg.items() if k not in ("PREC", "KMAJOR")}
        cand = Variant(v.design, cfg, v.fuse)
        if not any(cand.label() == o.label() for o in out):
            out.append(cand)
    # A knob can leave the program unchanged on this task (PRELOAD with a single load): keep the first.
    seen: set[str] = set()
    distinct = []
    for v in out:
        code = program_variant(source, name, v.design, v.config, tf32=tf32, fuse=v.fuse).code or ""
        body = code.split("\n", 2)[-1]  # past the header line and the docstring, which name the config
        if body not in seen:
            seen.add(body)
            distinct.append(v)
    return distinct[:limit] if limit else distinct


__all__ = ["Variant", "design_grid", "main_kernel_info", "main_matmul_info", "program_variant"]
