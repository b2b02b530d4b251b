"""The operands of a kernel and the broadcast groups its space is walked in: facts, no code.

A kernel reads tensors (`loads`), runtime scalars (`syms`) and tensors used only for their shape; its
iteration space S is cut into groups of adjacent dims along which every tensor broadcasts the same way,
so each tensor needs one stride per group at run time. Reduced dims (the kernel's `dims`) form "R"
groups, kept dims "K" groups. Row plans (row_plan.py) and the pointwise generator build on this; the
matmul generator overrides the grouping with its M/N/batch classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelwright.providers.offline.choice.schedule import Kernel, Schedule, inlinable_view
from kernelwright.providers.offline.frontend.ir import SymScalar, Value, aligned, is_one


class RowPlanError(ValueError):
    """The kernel cannot be written by this generator (or design); the writer tries another."""


@dataclass
class Load:
    value: Value
    name: str
    pattern: tuple[bool, ...]  # full (True) or broadcast per dim of S
    groups: list[int] = field(default_factory=list)  # group indices where it is full
    row: bool = False  # broadcast over every reduced dim: loaded once per row
    shared: bool = False  # broadcast over every kept dim: the same values for every row (a norm's weight)


class KernelPlan:
    """The loads, scalars and broadcast groups of kernel `k` of schedule `sched`."""

    groups: list[tuple[str, list[int]]]
    kept: list[int]
    red: list[int]
    inner: list[int]
    outer: list[int]

    def __init__(self, sched: Schedule, k: Kernel) -> None:
        self.s = sched
        self.k = k
        self.S = k.space
        self.D = set(k.dims)
        self.rank = len(self.S)
        self.owned = {v.id for v in k.values}
        self.loads: dict[int, Load] = {}
        self.syms: dict[int, tuple[str, SymScalar]] = {}
        self.shape_only: dict[int, Value] = {}
        self._collect()
        self._groups()

    def is_load(self, v: Value) -> bool:
        if v.id in self.owned:
            return False
        if v.kind in ("input", "param"):
            return True
        return self.s.owner.get(v.id) is not None

    def _collect(self) -> None:
        """Loads (tensors read), runtime scalars, and tensors used only for their shape."""
        seen: set[int] = set()
        stack = list(self.k.outputs) + list(self.k.values)
        while stack:
            v = stack.pop()
            if v.id in seen:
                continue
            seen.add(v.id)
            if self.is_load(v):
                self._add_load(v)
                continue
            if v.kind == "reduce" and v.op == "numel":
                x = v.args[0]
                if self.is_load(x) and x.id not in self.loads:
                    self.shape_only[x.id] = x
                elif not self.is_load(x):
                    stack.append(x)
                continue
            if v.kind == "view" and v.id not in self.owned and not inlinable_view(v):
                # Emitted as its source (kernel_gen), a slice, select or permute nothing wrote would
                # read the wrong elements: a value the schedule never saw (a pruned one) must not be
                # computed silently wrong, so the kernel is refused.
                raise RowPlanError(f"a {v.op} view the schedule did not place reaches the kernel")
            for a in v.args:
                if isinstance(a, Value):
                    stack.append(a)
                elif isinstance(a, SymScalar) and id(a) not in self.syms:
                    self.syms[id(a)] = (f"sym{len(self.syms)}", a)

    def _add_load(self, v: Value) -> None:
        if v.rank > self.rank:
            raise RowPlanError("a tensor of higher rank than the kernel's space")
        al = aligned(v.shape, self.rank)
        pattern = tuple(not is_one(al[d]) and not is_one(self.S[d]) for d in range(self.rank))
        self.loads[v.id] = Load(v, f"in{len(self.loads)}", pattern)

    def _groups(self) -> None:
        patterns = [ld.pattern for ld in self.loads.values()]
        for v in self._iotas():
            d = v.attrs["dim"] + (self.rank - v.rank)
            patterns.append(tuple(i == d for i in range(self.rank)))
        groups: list[tuple[str, list[int]]] = []
        prev = None
        for d in range(self.rank):
            if is_one(self.S[d]):
                continue
            sig = ("R" if d in self.D else "K", tuple(p[d] for p in patterns))
            if groups and sig == prev:
                groups[-1][1].append(d)
            else:
                groups.append((sig[0], [d]))
            prev = sig
        self.groups = groups
        for ld in self.loads.values():
            ld.groups = [gi for gi, (_, dims) in enumerate(groups) if ld.pattern[dims[0]]]
            ld.row = all(groups[gi][0] == "K" for gi in ld.groups)
            ld.shared = not any(groups[gi][0] == "K" for gi in ld.groups)
        self.kept = [gi for gi, (c, _) in enumerate(groups) if c == "K"]
        self.red = [gi for gi, (c, _) in enumerate(groups) if c == "R"]
        last_r = max(self.red) if self.red else -1
        self.inner = [gi for gi in self.kept if gi > last_r]
        self.outer = [gi for gi in self.kept if gi < last_r]

    def _iotas(self) -> list[Value]:
        out = []
        seen: set[int] = set()
        stack = list(self.k.values)
        while stack:
            v = stack.pop()
            if v.id in seen or self.is_load(v):
                continue
            seen.add(v.id)
            if v.kind == "pw" and v.op == "iota":
                out.append(v)
            stack.extend(v.tensor_args)
        return out
