"""Fusion decision: a normalisation whose value only feeds a full spatial sum or mean (plan.fold).

Such a normalisation needs no stored output: the reduction follows from its statistics partials
(conv_ir.NormFold; conv_codegen writes the folded kernel).
"""

from __future__ import annotations

from kernelwright.providers.offline.families.conv.conv_ir import SPATIAL, ConvPlan, NormFold, Op

_FOLD_NORMS = ("group", "instance", "batch", "layer")


def find_norm_fold(plan: ConvPlan) -> NormFold | None:
    """The normalisation whose effect reaches the output only through a sum or mean over every spatial
    dim, with nothing in between but work affine in the normalised value, or None.

    Affine work: +, - of such values or of values constant over the spatial dims, *, / (as numerator)
    by a value constant over the spatial dims, negation, and sums or means over channels. A value is
    constant over the spatial dims when it is built from scalars and per-channel tensors only (not
    from the convolution). Such work commutes with the spatial mean, so the reduction equals the work
    applied to each (sample, channel)'s mean of the normalised value (see conv_ir.NormFold). Work
    after the reduction is unrestricted (it reads the reduced buffer as before).
    """
    ops = plan.ops
    users: dict[int, list[int]] = {op.id: [] for op in ops}
    for op in ops:
        for a in op.args:
            users[a].append(op.id)
    static: dict[int, bool] = {}

    def is_static(i: int) -> bool:
        """The value is built from scalars and per-channel tensors only."""
        if i not in static:
            op = ops[i]
            if op.kind == "const":
                static[i] = True
            elif op.kind == "operand":
                static[i] = op.operand is not None and plan.operands[op.operand].kind in ("scalar", "channel")
            elif op.kind in ("unary", "binary", "where"):
                static[i] = bool(op.args) and all(is_static(a) for a in op.args)
            else:
                static[i] = False
        return static[i]

    spatial = set(SPATIAL[3 - plan.spec.ndim :])
    for norm in ops:
        if norm.kind != "norm" or norm.attrs.get("kind") not in _FOLD_NORMS:
            continue
        path = {norm.id}  # values affine in the normalised value
        reduce: Op | None = None
        ok = True
        for op in ops[norm.id + 1 :]:
            on = [a for a in op.args if a in path]
            if not on:
                continue
            rest = [a for a in op.args if a not in path]
            if op.kind == "sreduce":
                if reduce is not None or op.attrs.get("fn") not in ("sum", "mean"):
                    ok = False
                elif not set(op.attrs.get("dims", [])) >= spatial:
                    ok = False
                reduce = op
                break
            fn = op.attrs.get("fn")
            if op.kind == "creduce":
                ok = fn in ("sum", "mean")
            elif op.kind == "unary":
                ok = fn == "neg"
            elif op.kind == "binary":
                if not all(is_static(a) for a in rest):
                    ok = False
                elif fn in ("add", "sub"):
                    ok = True
                elif fn == "mul":
                    ok = len(on) == 1
                elif fn == "div":
                    ok = len(on) == 1 and op.args[0] in path
                else:
                    ok = False
            else:
                ok = False
            if not ok:
                break
            path.add(op.id)
        if not ok or reduce is None:
            continue
        # nothing but the reduction may read the affine values (a later use would need every element)
        if any(u not in path and u != reduce.id for p in path for u in users[p]):
            continue
        return NormFold(norm=norm.id, reduce=reduce.id)
    return None
