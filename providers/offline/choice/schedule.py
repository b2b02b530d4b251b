"""Splitting the IR into kernels: each anchor (reduction, scan, matmul) with its pointwise work fused in.

Every value gets an owner:
- a *row kernel* is keyed by an iteration space S and the dims D it reduces or scans over; it owns
  its reductions and scans ("stats"), the values of shape S computed from them ("full") and the values of
  S with D collapsed ("row": one per row); several reductions over the same (S, D) share one kernel
  (softmax's max and sum, layer norm's mean and variance, cross entropy's log-sum-exp and target pick);
- a *matmul kernel* owns its product and the pointwise epilogue of the same shape (bias, activation,
  scale, residual);
- *free* pointwise values belong to no kernel: they are recomputed inside whichever kernel needs them
  (a prologue), and written by a pointwise kernel only where something outside a kernel needs them;
- *glue* is what torch does in the forward: views of written tensors, and the ops kept as torch calls.

A value is written to memory ("materialised") only when something cannot read it from registers: a
graph output, an input of glue, or a value another kernel needs. The kernels and glue then run in
dependency order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy
import torch

from kernelwright.providers.offline.frontend.ir import Graph, Shape, Value, aligned, is_one, simplified
from kernelwright.providers.offline.operators import ROW_FAMILIES, ROW_FAMILY_OF


@dataclass(eq=False)
class Kernel:
    """One launch (row, matmul or pointwise kernel) or one glue step (a view or a kept torch op)."""

    id: int
    kind: str  # "rows" | "matmul" | "pointwise" | "glue"
    values: list[Value] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)
    space: Shape = ()
    dims: tuple[int, ...] = ()
    anchor: Value | None = None
    family: str = ""

    @property
    def name(self) -> str:
        return f"k{self.id}"

    def __repr__(self) -> str:
        return f"Kernel({self.id}, {self.kind}, fam={self.family}, space={list(self.space)}, dims={self.dims}, " \
               f"vals={[v.id for v in self.values]}, out={[v.id for v in self.outputs]})"  # fmt: skip


@dataclass
class Schedule:
    graph: Graph
    kernels: list[Kernel]
    owner: dict[int, Kernel]
    space: dict[int, str]  # "full" | "row" for values owned by row/matmul kernels
    materialised: set[int]
    stored: dict[int, torch.dtype] = field(default_factory=dict)
    """Values written in a narrower dtype than their own: an upcast of a half-precision value (a norm's
    or softmax's fp32 view of a bf16 product) is stored as the half value it holds exactly, and the kernels
    that read it widen it on load. Half the bytes between the two kernels; the same numbers."""

    def store_dtype(self, v: Value) -> torch.dtype:
        """The dtype `v` is written to and read from memory in."""
        return self.stored.get(v.id, v.dtype)

    def triton_kernels(self) -> list[Kernel]:
        return [k for k in self.kernels if k.kind != "glue"]


def shape_eq(a: Shape, b: Shape) -> bool:
    return len(a) == len(b) and all(simplified(x - y) == 0 for x, y in zip(a, b, strict=True))


def row_shape_kind(shape: Shape, space: Shape, dims: tuple[int, ...]) -> str | None:
    """Whether `shape` is the full space ("full"), one value per row ("row"), or neither (None)."""
    if shape_eq(shape, space):
        return "full"
    kept = tuple(d for i, d in enumerate(space) if i not in dims)
    keep_form = tuple((sympy.Integer(1) if i in dims else d) for i, d in enumerate(space))
    if shape_eq(shape, kept) or shape_eq(aligned(shape, len(space)), keep_form):
        return "row"
    # Equal up to size-1 dims (a squeezed or unsqueezed per-row value).
    nz = [d for d in shape if not is_one(d)]
    nk = [d for d in kept if not is_one(d)]
    if len(nz) == len(nk) and all(simplified(x - y) == 0 for x, y in zip(nz, nk, strict=True)) and nk:
        return "row"
    return None


class _Scheduler:
    def __init__(self, graph: Graph) -> None:
        self.g = graph
        self.kernels: list[Kernel] = []
        self.owner: dict[int, Kernel] = {}
        self.space: dict[int, str] = {}
        self.mat: set[int] = set()
        self.free_mat: list[Value] = []
        self.by_id = {v.id: v for v in graph.values}

    def new_kernel(self, kind: str, **kw: object) -> Kernel:
        k = Kernel(len(self.kernels), kind, **kw)  # type: ignore[arg-type]
        self.kernels.append(k)
        return k

    # ---- materialisation ---------------------------------------------------------------------------
    def need(self, v: Value) -> None:
        """`v` must be in memory: its owner writes it (a pointwise kernel for free values)."""
        if v.id in self.mat:
            return
        self.mat.add(v.id)
        if v.kind in ("input", "param"):
            return
        k = self.owner.get(v.id)
        if k is None:
            if v.kind == "pw":
                self.free_mat.append(v)
            return
        if k.kind == "glue":
            return
        if v not in k.outputs:
            k.outputs.append(v)

    # ---- dependencies ------------------------------------------------------------------------------
    def reads(self, v: Value) -> set[int]:
        """Kernels whose results `v` needs: its own kernel if it has one, else what its inputs need."""
        out: set[int] = set()
        stack = [v]
        seen: set[int] = set()
        while stack:
            x = stack.pop()
            if x.id in seen:
                continue
            seen.add(x.id)
            k = self.owner.get(x.id)
            if k is not None:
                out.add(k.id)
                continue
            stack.extend(x.tensor_args)
        return out

    def kernel_deps(self, k: Kernel, memo: dict[int, set[int]] | None = None) -> set[int]:
        memo = {} if memo is None else memo
        if k.id in memo:
            return memo[k.id]
        memo[k.id] = set()
        direct: set[int] = set()
        for v in k.values:
            for a in value_args(v):
                if self.owner.get(a.id) is not k:
                    direct |= {d for d in self.reads(a) if d != k.id}
        out = set(direct)
        for d in direct:
            out |= self.kernel_deps(self.kernels[d], memo)
        memo[k.id] = out
        return out

    def depends_on(self, v: Value, k: Kernel) -> bool:
        memo: dict[int, set[int]] = {}
        for d in self.reads(v):
            if d == k.id or k.id in self.kernel_deps(self.kernels[d], memo):
                return True
        return False

    # ---- assignment --------------------------------------------------------------------------------
    def run(self) -> Schedule:
        for v in self.g.values:
            if v.kind in ("input", "param"):
                continue
            getattr(self, f"_on_{v.kind}")(v)
        for o in self.g.outputs + self.g.side_outputs:
            self.need(o)
        self._pointwise_kernels()
        for k in self.kernels:
            k.family = self._family(k)
        order = self._order()
        return Schedule(self.g, order, self.owner, self.space, self.mat, self._narrow_stores())

    def _narrow_stores(self) -> dict[int, torch.dtype]:
        """Materialised upcasts (`cast` of a fp16/bf16 value to fp32) that only row and pointwise kernels
        read: stored in the half dtype, which holds their values exactly (see Schedule.stored). Graph
        outputs keep their dtype, and so does anything a torch call (glue) or a matmul reads."""
        outputs = {v.id for v in self.g.outputs + self.g.side_outputs}
        readers: dict[int, set[int]] = {}
        for k in self.kernels:
            for x in self._values_read(k):
                readers.setdefault(x.id, set()).add(k.id)
        out: dict[int, torch.dtype] = {}
        for k in self.kernels:
            if k.kind == "glue":
                continue
            for v in k.outputs:
                src = v.args[0] if v.kind == "pw" and v.op == "cast" and v.args else None
                if (
                    isinstance(src, Value)
                    and src.dtype in (torch.float16, torch.bfloat16)
                    and v.dtype == torch.float32
                    and v.id not in outputs
                    and readers.get(v.id)
                    and all(self.kernels[r].kind in ("rows", "pointwise") for r in readers[v.id])
                ):
                    out[v.id] = src.dtype
        return out

    def _values_read(self, k: Kernel) -> list[Value]:
        """Values kernel `k` reads from memory: arguments of its values (and of the free values it
        recomputes) that it does not own."""
        seen: set[int] = set()
        read: dict[int, Value] = {}
        stack = [a for v in k.values for a in value_args(v)]
        while stack:
            x = stack.pop()
            if x.id in seen:
                continue
            seen.add(x.id)
            if self.owner.get(x.id) is k:
                continue
            if x.id in self.mat or x.kind in ("input", "param") or self.owner.get(x.id) is not None:
                read[x.id] = x
                continue
            stack.extend(value_args(x))  # free: recomputed
        return list(read.values())

    def _glue(self, v: Value) -> None:
        k = self.new_kernel("glue", values=[v], outputs=[v], anchor=v)
        self.owner[v.id] = k
        self.mat.add(v.id)

    def _on_opaque(self, v: Value) -> None:
        for a in value_args(v):
            self.need(a)
        self._glue(v)

    def _on_view(self, v: Value) -> None:
        src = v.args[0]
        if v.op == "item":
            self._glue(v)
            return
        ks = self.owner.get(src.id)
        if (
            ks is not None
            and ks.kind == "rows"
            and self.space.get(src.id) == "row"
            and v.op in ("reshape", "expand")
        ):
            kind = row_shape_kind(v.shape, ks.space, ks.dims)
            if kind == "row" or (kind == "full" and v.op == "expand"):
                # The same per-row values with a size-1 dim added, dropped or broadcast: no copy.
                self._own(v, ks, kind)
                return
        if ks is None and src.kind not in ("input", "param") and inlinable_view(v):
            return  # broadcasting a free value: recomputed where it is used, like the value itself
        self.need(src)
        self._glue(v)

    def _own(self, v: Value, k: Kernel, space: str) -> None:
        self.owner[v.id] = k
        self.space[v.id] = space
        k.values.append(v)

    def _row_kernel_for(self, v: Value, space: Shape, dims: tuple[int, ...]) -> Kernel:
        x = v.args[0]
        kx = self.owner.get(x.id)
        if kx is not None and kx.kind == "rows" and shape_eq(kx.space, space) and kx.dims == dims:
            return kx
        if kx is not None and kx.kind != "glue":
            self.need(x)
        for k in self.kernels:
            if k.kind == "rows" and shape_eq(k.space, space) and k.dims == dims and not self.depends_on(x, k):
                return k
        return self.new_kernel("rows", space=tuple(space), dims=dims)

    def _on_reduce(self, v: Value) -> None:
        x = v.args[0]
        dims = tuple(v.attrs["dims"])
        if x.rank == 0:
            dims = ()
        k = self._row_kernel_for(v, x.shape, dims)
        self._own(v, k, "row")

    def _on_scan(self, v: Value) -> None:
        x = v.args[0]
        k = self._row_kernel_for(v, x.shape, (v.attrs["dim"],))
        self._own(v, k, "full")

    def _on_matmul(self, v: Value) -> None:
        for a in v.tensor_args:
            self.need(a)
        k = self.new_kernel("matmul", anchor=v, space=v.shape)
        self._own(v, k, "full")

    def _on_pw(self, v: Value) -> None:
        ks = {}
        for a in v.tensor_args:
            k = self.owner.get(a.id)
            if k is not None and k.kind != "glue":
                ks[k.id] = k
        if not ks:
            return  # free: inlined where it is needed
        k = ks[max(ks)]
        kind = None
        if k.kind == "rows":
            kind = row_shape_kind(v.shape, k.space, k.dims)
        elif k.kind == "matmul" and shape_eq(v.shape, k.space):
            kind = "full"
        if kind is not None and any(
            self.owner.get(a.id) is not k and self.depends_on(a, k) for a in v.tensor_args
        ):
            # an input of v needs this kernel's results (a free value computed from them, or a view of
            # them torch takes: cumsum's last column minus the cumsum): v must come after it
            kind = None
        if kind is not None:
            for a in v.tensor_args:
                ka = self.owner.get(a.id)
                if ka is not None and ka is not k:
                    self.need(a)
            self._own(v, k, kind)
            return
        for a in v.tensor_args:
            if self.owner.get(a.id) is not None:
                self.need(a)

    def _pointwise_kernels(self) -> None:
        groups: dict[tuple, Kernel] = {}
        for v in self.free_mat:
            key = (tuple(str(d) for d in v.shape), tuple(sorted(self.reads(v))))
            k = groups.get(key)
            if k is None:
                k = self.new_kernel("pointwise", space=v.shape)
                groups[key] = k
            self.owner[v.id] = k
            k.values.append(v)
            k.outputs.append(v)

    def _family(self, k: Kernel) -> str:
        if k.kind == "glue":
            op = k.anchor.op if k.anchor is not None else ""
            return "conv" if "conv" in op else "other"
        if k.kind in ("matmul", "pointwise"):
            return k.kind
        fams = {ROW_FAMILY_OF.get(v.origin) for v in k.values if v.kind in ("reduce", "scan")}
        fams |= {ROW_FAMILY_OF.get(v.origin) for v in k.values}
        for f in ROW_FAMILIES:
            if f in fams:
                return f
        return "reduction"

    def _order(self) -> list[Kernel]:
        memo: dict[int, set[int]] = {}
        deps = {k.id: self.kernel_deps(k, memo) for k in self.kernels}
        for k in self.kernels:
            if k.id in deps[k.id]:
                raise ValueError(f"internal: kernel {k.id} depends on itself")
        done: list[Kernel] = []
        placed: set[int] = set()
        pending = list(self.kernels)
        while pending:
            for k in pending:
                if deps[k.id] <= placed:
                    done.append(k)
                    placed.add(k.id)
                    pending.remove(k)
                    break
            else:
                raise ValueError("internal: kernels depend on each other in a cycle")
        return done


def inlinable_view(v: Value) -> bool:
    """A view that only broadcasts or adds/drops leading size-1 dims: loads keep their alignment."""
    src = v.args[0]
    if v.op == "expand":
        return True
    if v.op != "reshape":
        return False
    a = [d for d in src.shape]
    b = [d for d in v.shape]
    while a and is_one(a[0]):
        a.pop(0)
    while b and is_one(b[0]):
        b.pop(0)
    return shape_eq(tuple(a), tuple(b))


def walk_values(x: object) -> list[Value]:
    if isinstance(x, Value):
        return [x]
    if isinstance(x, list | tuple):
        out: list[Value] = []
        for y in x:
            out.extend(walk_values(y))
        return out
    if isinstance(x, dict):
        out = []
        for y in x.values():
            out.extend(walk_values(y))
        return out
    return []


def value_args(v: Value) -> list[Value]:
    """The values `v` is computed from: in its arguments and its keyword arguments, nested or not."""
    return walk_values(v.args) + walk_values(v.attrs.get("kwargs", {}))


def schedule(graph: Graph) -> Schedule:
    return _Scheduler(graph).run()
