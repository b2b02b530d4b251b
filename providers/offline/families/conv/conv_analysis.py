"""Reading a task's Model as "one convolution, then fusable work", with torch.fx.

`analyze_conv_model(model, inputs)` traces the forward symbolically (torch.fx), propagates the example
inputs' shapes through the graph, and walks it from the convolution to the output. Everything after
the convolution must be one of:
- pointwise ops (activations, arithmetic, clamps, comparisons, where) on the convolution's values and
  on tensors that do not depend on it (parameters, buffers, other forward inputs, scalars), broadcast
  onto the convolution's grid;
- reductions over channels (sum/mean/max/min, logsumexp, softmax and log-softmax over dim 1);
- pooling (max/avg with any kernel, stride, padding; adaptive pooling to size 1);
- reductions over spatial dims (sum/mean/max/min over any subset);
- normalisations (group, instance, batch in training or eval mode, layer norm over C and/or all
  spatial dims);
- views that only add, drop or (at the end) merge dims.
Anything else gives None (with the reason from `explain_conv_model`), and the writer keeps the torch
convolution instead.

`find_norm_fold(plan)` (run on every plan, stored as plan.fold) finds a normalisation whose value
reaches the output only through affine per-channel work and a sum or mean over every spatial dim.

The walk is split by purpose: conv_values (the values a node can have), conv_calls (reading calls into
ops), conv_builder (the op list and how values meet on the convolution's grid), conv_regions
(reductions, pooling, normalisation, views), conv_spec_reader (the convolution itself) and conv_fold
(the fold decision).

Scalars from the model's own attributes (`self.scale = scale`) stay attribute reads in the generated
forward, so the program is right for every constructor argument, not only the analysed one.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
from torch.fx.passes.shape_prop import ShapeProp

from kernelwright.providers.offline.families.conv.conv_builder import OpBuilder
from kernelwright.providers.offline.families.conv.conv_calls import CallReader
from kernelwright.providers.offline.families.conv.conv_fold import find_norm_fold
from kernelwright.providers.offline.families.conv.conv_ir import Const, ConvPlan
from kernelwright.providers.offline.families.conv.conv_regions import RegionOps
from kernelwright.providers.offline.families.conv.conv_values import (
    Chain,
    ConvUnsupported,
    call_name,
    const_of,
    leaf_of,
)
from kernelwright.providers.offline.frontend.named_scalars import name_scalars, restore_scalars
from kernelwright.tasks.analysis import MODEL_LOCK

__all__ = ["ConvAnalysis", "ConvUnsupported", "analyze_conv_model", "explain_conv_model", "find_norm_fold"]


class _Analyzer:
    """Traces the model, propagates the example shapes, and walks the graph from the inputs to the output
    (calls go to CallReader); the plan comes from the OpBuilder."""

    def __init__(self, model: nn.Module, inputs: list[Any]) -> None:
        self.model = model
        self.inputs = inputs
        self.gm: fx.GraphModule | None = None
        self.own_attrs: set[str] = set()
        self.b = OpBuilder()
        self.r = RegionOps(self.b, model, self._attr)
        self.calls = CallReader(self.b, self.r, self._attr)

    def run(self) -> ConvPlan:
        with MODEL_LOCK:  # fx tracing patches nn.Module process-wide (tasks.analysis.MODEL_LOCK)
            return self._run()

    def _run(self) -> ConvPlan:
        saved = name_scalars(self.model)
        self.own_attrs = set(vars(self.model))
        try:
            try:
                gm = fx.symbolic_trace(self.model)
            except Exception as exc:
                raise ConvUnsupported(
                    f"torch.fx cannot trace the forward ({type(exc).__name__}: {exc})"
                ) from None
            self.gm = gm
            try:
                with torch.no_grad():
                    ShapeProp(gm).propagate(*self.inputs)
            except Exception as exc:
                raise ConvUnsupported(f"shape propagation failed ({type(exc).__name__}: {exc})") from None
            forward_args = self._forward_args()
            result = None
            for node in gm.graph.nodes:
                if node.op == "output":
                    result = node.args[0]
                    break
                self.calls.vals[node] = self._visit(node)
        finally:
            restore_scalars(self.model, saved)
            for name in set(vars(self.model)) - self.own_attrs:  # constants the tracer lifted onto it
                delattr(self.model, name)
        if self.b.spec is None:
            raise ConvUnsupported("no convolution in the forward")
        if not isinstance(result, fx.Node) or not isinstance(self.calls.vals.get(result), Chain):
            raise ConvUnsupported("the forward must return one tensor computed from the convolution")
        out = self.calls.vals[result]
        flat = [d for g in out.dims for d in g]
        if flat != sorted(flat):
            raise ConvUnsupported("the output permutes dims")
        return self.b.finish(out, forward_args)

    def _forward_args(self) -> list[str]:
        sig = inspect.signature(self.model.forward)
        names = []
        for p in sig.parameters.values():
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                raise ConvUnsupported("forward takes *args/**kwargs or keyword-only arguments")
            names.append(p.name)
        if len(names) != len(self.inputs):
            raise ConvUnsupported(f"forward takes {len(names)} arguments, the inputs are {len(self.inputs)}")
        return names

    def _visit(self, node: fx.Node) -> Any:
        if node.op == "placeholder":
            return self._placeholder(node)
        if node.op == "get_attr":
            value = self._attr(str(node.target))
            if not self._model_has(str(node.target)):
                # a constant the tracer lifted (torch.tensor(0.0) in the forward): ModelNew lacks it
                if isinstance(value, torch.Tensor) and value.numel() == 1 and value.is_floating_point():
                    return Const(value=float(value), expr=repr(float(value)))
                raise ConvUnsupported("a tensor constant created in the forward")
            if isinstance(value, torch.Tensor):
                return leaf_of(f"self.{node.target}", tuple(value.shape))
            return const_of(value)
        if node.op == "call_module":
            return self.calls.module(node, self.gm.get_submodule(str(node.target)))  # type: ignore[union-attr]
        if node.op in ("call_function", "call_method"):
            return self.calls.function(node, call_name(node))
        raise ConvUnsupported(f"graph node {node.op}")

    def _model_has(self, target: str) -> bool:
        """Whether `target` is the model's own (not a constant the tracer lifted onto it)."""
        first = target.split(".")[0]
        m = self.model
        if first not in self.own_attrs and all(
            first not in d for d in (m._parameters, m._buffers, m._modules)
        ):
            return False
        obj: Any = m
        for part in target.split("."):
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True

    def _attr(self, target: str) -> Any:
        obj: Any = self.gm
        for part in target.split("."):
            obj = getattr(obj, part)
        return obj

    def _placeholder(self, node: fx.Node) -> Any:
        index = [n for n in self.gm.graph.nodes if n.op == "placeholder"].index(node)  # type: ignore[union-attr]
        example = self.inputs[index]
        if isinstance(example, torch.Tensor):
            shape = tuple(example.shape)
            return leaf_of(str(node.target), shape)
        if isinstance(example, int | float) and not isinstance(example, bool):
            return Const(value=float(example), expr=str(node.target))
        raise ConvUnsupported(f"forward argument {node.target} of type {type(example).__name__}")


@dataclass
class ConvAnalysis:
    """A plan, or why there is none."""

    plan: ConvPlan | None
    reason: str = ""


def explain_conv_model(model: nn.Module, inputs: list[Any] | tuple[Any, ...]) -> ConvAnalysis:
    """Like analyze_conv_model, with the reason when the model is not supported."""
    try:
        return ConvAnalysis(plan=_Analyzer(model, list(inputs)).run())
    except ConvUnsupported as exc:
        return ConvAnalysis(plan=None, reason=str(exc))


def analyze_conv_model(model: nn.Module, inputs: list[Any] | tuple[Any, ...]) -> ConvPlan | None:
    """The model's forward as one convolution plus fusable work, or None when it is not of that form.

    `inputs` are example forward inputs (small ones are best: the forward is run once for shapes).
    The model is not changed.
    """
    return explain_conv_model(model, inputs).plan
