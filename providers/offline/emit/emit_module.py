"""Assembling one complete candidate module: kernels, launchers and a `ModelNew` that mirrors `Model`.

`ModelNew.__init__` is the task's own constructor (copied from its source), so parameters and buffers
have the same names and shapes for any constructor arguments and the harness can copy the reference's
state_dict. `ModelNew.forward` has the same signature as `Model.forward`; its body is glue: torch views
and the ops kept as torch calls, and one call per launcher, in dependency order.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

import sympy
import torch

from kernelwright.providers.offline.choice.designs import KINDS
from kernelwright.providers.offline.choice.schedule import Kernel, Schedule
from kernelwright.providers.offline.emit.emit import BN_RUNNING, HELPERS, RUNTIME, Code, ExprContext, py_expr
from kernelwright.providers.offline.emit.emit_matmul import MatmulConfig
from kernelwright.providers.offline.emit.emit_pointwise import PointwiseConfig
from kernelwright.providers.offline.emit.emit_rows import RowConfig
from kernelwright.providers.offline.emit.kernel_gen import KernelGen
from kernelwright.providers.offline.frontend.analysis import AnalyzedTask
from kernelwright.providers.offline.frontend.ir import SymScalar, Value
from kernelwright.providers.protocol import KernelHeader
from kernelwright.tasks.pyast import parse_python

KernelConfig = RowConfig | MatmulConfig | PointwiseConfig


@dataclass
class ProgramMeta:
    family: str
    design: str
    config: dict[str, Any]

    def line(self) -> str:
        return KernelHeader.of(self.family, self.design, self.config).render()


class EmitError(ValueError):
    """The writer cannot produce a program for this task and plan; one line."""


class UndefinedNameError(EmitError):
    """The forward would read a name it never defines (a value the schedule left unwritten): no design
    or config writes it, so the task is refused rather than written as a program that raises NameError."""


def check_forward_names(source: str) -> None:
    """Raises UndefinedNameError where `ModelNew.forward` reads a name before (or without) defining it
    that is neither a module-level name of the program nor a builtin."""
    import builtins

    tree = parse_python(source)
    known = set(dir(builtins))
    forward = None
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            known |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            known.add(node.name)
            if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
                forward = next(
                    (f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "forward"), None
                )
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            known |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if forward is None:
        return
    a = forward.args
    defined = known | {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    defined |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    for stmt in forward.body:
        # a comprehension's or lambda's own variables are defined inside the statement that reads them
        local = {n.id for c in ast.walk(stmt) if isinstance(c, ast.comprehension) for n in ast.walk(c.target)
                 if isinstance(n, ast.Name)}  # fmt: skip
        local |= {x.arg for f in ast.walk(stmt) if isinstance(f, ast.Lambda) for x in f.args.args}
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in defined | local:
                raise UndefinedNameError(
                    f"the forward would read {n.id} (line {n.lineno}) without defining it"
                )
        defined |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _param_expr(name: str) -> str:
    parts = name.split(".")
    if all(re.fullmatch(r"[A-Za-z_]\w*", p) for p in parts):
        return "self." + name
    return f"self.get_parameter({name!r})"


def _module_expr(path: str) -> str:
    parts = path.split(".")
    if all(re.fullmatch(r"[A-Za-z_]\w*", p) for p in parts):
        return "self." + path
    return f"self.get_submodule({path!r})"


def _module_conv(packet: str, args: list[str], module: str) -> str:
    """A module's convolution, its hyper-parameters read from the module at run time (`padding=k // 2`
    is a number in the trace, right at one kernel size only)."""
    x, w, b = (args + ["None"] * 3)[:3]
    hyper: tuple[str, ...] = ("stride", "padding", "dilation", "groups")
    if packet.startswith("conv_transpose"):
        hyper = ("stride", "padding", "output_padding", "groups", "dilation")
    return f"torch.nn.functional.{packet}({x}, {w}, {b}, " + ", ".join(f"{module}.{h}" for h in hyper) + ")"


class _Glue:
    """Names of values inside the forward, and Python for the torch steps."""

    def __init__(self, task: AnalyzedTask) -> None:
        self.task = task
        g = task.graph
        self.names: dict[int, str] = {}
        for v in g.inputs:
            self.names[v.id] = v.attrs["name"]
        for v in g.params:
            self.names[v.id] = f"p_{re.sub(r'[^0-9A-Za-z_]', '_', v.attrs['name'])}"
        self.symmap: dict[sympy.Symbol, str] = {}
        for sym, (v, d) in g.sym_sources.items():
            # An input's or a parameter's size, or one read from a torch call's result (lowering.py).
            self.symmap[sym] = f"{self.name(v)}.shape[{d}]"
        self.symmap.update(g.attr_sources)
        self.first_tensor = next((self.names[v.id] for v in g.inputs if not v.attrs.get("scalar")), None)

    def name(self, v: Value) -> str:
        if v.id not in self.names:
            self.names[v.id] = f"t{v.id}"
        return self.names[v.id]

    def arg(self, x: Any) -> str:
        if isinstance(x, Value):
            return self.name(x)
        if isinstance(x, SymScalar):
            return py_expr(x, self.symmap)
        if isinstance(x, sympy.Basic):
            return py_expr(x, self.symmap)
        if isinstance(x, list):
            return "[" + ", ".join(self.arg(y) for y in x) + "]"
        if isinstance(x, tuple):
            return "(" + "".join(self.arg(y) + ", " for y in x) + ")"
        if isinstance(x, torch.dtype):
            return str(x)
        if isinstance(x, torch.device):
            return f"{self.first_tensor}.device" if self.first_tensor else "None"
        if isinstance(x, torch.layout):
            return "torch.strided"
        if isinstance(x, torch.memory_format):
            return "torch." + str(x).split(".")[-1]
        if isinstance(x, float):
            if x != x:
                return 'float("nan")'
            if x in (float("inf"), float("-inf")):
                return 'float("inf")' if x > 0 else '-float("inf")'
        return repr(x)

    def shape(self, shape: tuple, infer: int | None = None) -> str:
        parts = ["-1" if i == infer else py_expr(d, self.symmap) for i, d in enumerate(shape)]
        return "(" + "".join(p + ", " for p in parts) + ")"

    def step(self, v: Value) -> str:
        """Python for one glue value."""
        if v.kind == "view":
            src = self.name(v.args[0]) if v.op != "item" else self.name(v.args[0])
            if v.op == "reshape":
                return f"{src}.reshape{self.shape(v.attrs['shape'], v.attrs.get('infer'))}"
            if v.op == "permute":
                return f"{src}.permute{tuple(v.attrs['dims'])!r}"
            if v.op == "expand":
                return f"{src}.expand{self.shape(v.attrs['shape'])}"
            if v.op == "slice":
                dim, step = v.attrs["dim"], v.attrs["step"]
                start, end = py_expr(v.attrs["start"], self.symmap), py_expr(v.attrs["end"], self.symmap)
                sl = ":, " * dim + f"{start}:{end}" + (f":{step}" if step != 1 else "")
                return f"{src}[{sl}]"
            if v.op == "select":
                return f"{src}.select({v.attrs['dim']}, {py_expr(v.attrs['index'], self.symmap)})"
            if v.op == "item":
                return f"{src}[{v.attrs['index']}]"
        if v.kind == "opaque":
            target = v.attrs["target"]
            packet = target.overloadpacket.__name__
            args = [self.arg(a) for a in v.args]
            kwargs = [f"{k}={self.arg(x)}" for k, x in v.attrs.get("kwargs", {}).items()]
            if "module" in v.attrs:
                return _module_conv(packet, args, _module_expr(v.attrs["module"]))
            if packet in ("conv1d", "conv2d", "conv3d") and not kwargs:
                return f"torch.nn.functional.{packet}({', '.join(args)})"
            return f"torch.ops.aten.{packet}.{target._overloadname}({', '.join(args + kwargs)})"
        raise EmitError(f"no glue for {v.kind} {v.op}")


def _generator(sched: Schedule, k: Kernel, cfg: KernelConfig, ctx: ExprContext) -> KernelGen:
    kind = KINDS[k.kind]
    assert isinstance(cfg, kind.config)
    return kind.generator(sched, k, cfg, ctx)


def emit_program(task: AnalyzedTask, sched: Schedule, configs: dict[int, KernelConfig], meta: ProgramMeta,
                 explanation: str) -> str:  # fmt: skip
    """The complete candidate module source."""
    glue = _Glue(task)
    ctx = ExprContext()
    kernel_srcs: list[str] = []
    launcher_srcs: list[str] = []
    body = Code()
    body.level = 2
    for v in task.graph.params:
        body(f"{glue.name(v)} = {_param_expr(v.attrs['name'])}")
    for k in sched.kernels:
        if k.kind == "glue":
            assert k.anchor is not None
            body(f"{glue.name(k.anchor)} = {glue.step(k.anchor)}")
            continue
        gen = _generator(sched, k, configs[k.id], ctx)
        kname = f"{k.name}_{k.family}"
        ksrc, lsrc, tensors, syms = gen.generate(kname, glue.symmap)
        kernel_srcs.append(ksrc)
        launcher_srcs.append(lsrc)
        args = [glue.name(t) for t in tensors] + [py_expr(s, glue.symmap) for s in syms]
        if gen.launch_device:
            dev = glue.name(tensors[0]) + ".device" if tensors else f"{glue.first_tensor}.device"
            args.append(dev)
        shape_arg = getattr(gen, "shape_arg", None)
        if shape_arg is not None:
            args.append(glue.shape(shape_arg))
        names = ", ".join(glue.name(v) for v in k.outputs)
        body(f"{names}{',' if len(k.outputs) == 1 else ''} = _launch_{kname}({', '.join(args)})")
    for upd in task.graph.bn_updates:
        # Train mode: the running statistics follow the batch statistics the kernels computed.
        module = _param_expr(upd["module"])
        body(f"if {module}.training:")
        body(f"    _kw_bn_running({module}, {glue.name(upd['mean'])}, {glue.name(upd['rstd'])}, "
             f"{py_expr(upd['count'], glue.symmap)})")  # fmt: skip
    outs = [glue.name(v) for v in task.graph.outputs]
    kind = task.graph.output_kind
    if kind == "single":
        body(f"return {outs[0]}")
    elif kind == "list":
        body(f"return [{', '.join(outs)}]")
    else:
        body(f"return ({''.join(o + ', ' for o in outs)})")

    m = task.model
    c = Code()
    c(meta.line())
    c(f'"""{explanation}"""')
    c()
    imports = ["import torch", "import torch.nn as nn", "import triton", "import triton.language as tl"]
    for imp in m.imports:
        if imp not in imports:
            imports.append(imp)
    for imp in imports:
        c(imp)
    c()
    for h in m.helpers:
        c()
        for line in h.splitlines():
            c(line)
    c(RUNTIME.rstrip("\n"))
    c(HELPERS["_kw_launch"].rstrip("\n"))
    if task.graph.bn_updates:
        c(BN_RUNNING.rstrip("\n"))
    for name in sorted(ctx.helpers):
        c(HELPERS[name].rstrip("\n"))
    for src in kernel_srcs:
        c()
        c()
        c(src.rstrip("\n"))
    for src in launcher_srcs:
        c()
        c()
        c(src.rstrip("\n"))
    c()
    c()
    c("class ModelNew(nn.Module):")
    with c.indent():
        for line in m.init_def.splitlines():
            c(line)
        c()
        c(f"def forward({m.forward_args}):")
    c.lines.extend(body.lines)
    text = c.text()
    check_forward_names(text)
    return text
