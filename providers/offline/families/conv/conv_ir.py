"""The typed description of a convolution task that the Triton convolution writer works from.

`analyze_conv_model` (conv_analysis.py) turns a task's `Model` into a `ConvPlan`; `emit_conv_program`
(conv_codegen.py) turns a plan, a design and a `ConvConfig` into a candidate module. The plan is
structural: sizes come from tensors at run time, and hyper-parameters are kept as Python expressions
(`self.conv.stride`, `self.scale`) that the generated forward evaluates, so one program serves every
shape and constructor argument of the task.

Values are described on a logical 5-D grid (N, C, D, H, W): a 1-D convolution's output (N, C, L) sits
on it as (N, C, 1, 1, L), a 2-D one's as (N, C, 1, H, W). Logical dims are numbered 0..4.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

LOGICAL_DIMS = 5
SPATIAL = (2, 3, 4)

OpKind = Literal[
    "conv",  # the convolution's output (always op 0), without its bias
    "operand",  # an external tensor (parameter, buffer, forward input) broadcast onto the grid
    "const",  # a scalar
    "unary",  # attrs["fn"] a unary op of operators.OPERATORS, consts = its `params`
    "binary",  # attrs["fn"] a binary op of operators.OPERATORS
    "where",  # args = (condition, a, b)
    "creduce",  # reduction over channels (attrs["fn"] in sum/mean/max/min): one value per pixel
    "pool",  # max/avg pooling windows over the spatial dims
    "sreduce",  # reduction over some spatial dims (attrs["fn"], attrs["dims"] logical dims)
    "norm",  # normalisation with statistics from the whole tensor (group/instance/batch/layer norm)
]


class Const(BaseModel):
    """A scalar: its value in the analysed model and the expression the generated forward evaluates."""

    model_config = ConfigDict(frozen=True)

    value: float
    expr: str
    """Python expression in ModelNew.forward's scope, e.g. "self.scale_factor" or "0.5"."""


class ConvOperand(BaseModel):
    """An external tensor the epilogue reads, broadcast onto the logical grid of the value it meets."""

    expr: str
    """Python expression for the tensor in ModelNew.forward: "self.bias", "self.gn.weight", "y"."""
    align: list[int | None]
    """For each dim of the tensor: the logical dim (0..4) it runs along, or None where it is broadcast
    (size 1). Leading dims the tensor lacks are broadcast too."""
    kind: Literal["scalar", "channel", "full"]
    """scalar: one value; channel: varies along C only (a per-channel vector); full: anything else,
    gathered element by element with the tensor's own strides."""


class PoolPart(BaseModel):
    """One pooling layer as Python expressions (ints or tuples, normalised at run time)."""

    kernel: str
    stride: str
    padding: str = "0"
    dilation: str = "1"
    count_include_pad: bool = True


class Op(BaseModel):
    """One operation of the fused program; `args` are ids of earlier ops."""

    id: int
    kind: OpKind
    args: list[int] = Field(default_factory=list)
    consts: list[Const] = Field(default_factory=list)
    operand: int | None = None
    attrs: dict[str, Any] = Field(default_factory=dict)
    """unary/binary: fn; creduce/sreduce: fn (+ dims); pool: kind ("max"|"avg") and parts (PoolPart
    dicts, composed when several non-overlapping pools follow each other); norm: kind
    ("group"|"instance"|"batch"|"layer"), groups (expression), eps (expression)."""
    cred: bool = False
    """The value is reduced over channels (one value per pixel)."""


class ConvSpec(BaseModel):
    """The convolution itself, as seen in the analysed model (sizes for choosing a design only)."""

    ndim: Literal[1, 2, 3]
    transposed: bool = False
    in_channels: int
    out_channels: int
    kernel_size: list[int]
    stride: list[int]
    padding: list[int]
    """Left padding per spatial dim ('same' padding resolved)."""
    dilation: list[int]
    output_padding: list[int]
    groups: int = 1
    bias: bool = True
    dtype: str = "float32"
    same_padding: bool = False
    """padding='same': the output has the input's size and padding is recomputed at run time."""
    module: str | None = None
    """Qualified name of the nn.ConvNd module when there is one: its stride, padding, ... are read from
    it at run time (`self.<module>.stride`)."""
    weight: str = ""
    """Expression for the weight tensor, e.g. "self.conv.weight"."""
    bias_expr: str | None = None
    hyper: dict[str, str] = Field(default_factory=dict)
    """For a functional convolution (F.conv2d): expressions for stride, padding, dilation, groups,
    output_padding."""

    @property
    def in_per_group(self) -> int:
        return self.in_channels // self.groups

    @property
    def out_per_group(self) -> int:
        return self.out_channels // self.groups

    @property
    def reduction(self) -> int:
        """The implicit GEMM's reduction length: input channels per group times the kernel's taps."""
        return self.in_per_group * math.prod(self.kernel_size)

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.in_per_group == 1


class NormFold(BaseModel):
    """A per-channel-affine normalisation whose only use is a sum or mean over every spatial dim.

    Between `norm` and `reduce` there is only work that is affine in the normalised value with
    coefficients constant over the spatial dims (per-channel or scalar scales and shifts) and sums or
    means over channels. Such work commutes with the spatial mean, so the reduced value is that work
    applied to the spatial mean of the normalised value, rstd * (sum(x) / P - mean) per (sample,
    channel), which the normalisation's per-tile partials (count, sum) already hold: the value before
    the normalisation need not be stored and read back."""

    norm: int
    """Id of the norm op (statistics from its input's whole tensor: training statistics)."""
    reduce: int
    """Id of the sreduce op (sum or mean over all spatial dims) that ends the folded work."""


class ConvPlan(BaseModel):
    """A task's forward as one convolution followed by fusable work; what the emitter needs."""

    spec: ConvSpec
    ops: list[Op]
    operands: list[ConvOperand] = Field(default_factory=list)
    output: int
    """Id of the op whose value the forward returns."""
    out_groups: list[list[int]]
    """The returned tensor's dims as groups of logical dims (merged by a final view/flatten); an empty
    group is a size-1 dim. E.g. a 2-D conv's (N, C, H, W) output is [[0], [1], [3], [4]]."""
    forward_args: list[str]
    conv_input: str
    """The forward argument the convolution reads."""
    notes: list[str] = Field(default_factory=list)
    full_spec: ConvSpec | None = None
    """The convolution's sizes at the task's full size when known (they choose designs and tiles)."""
    fold: NormFold | None = None
    """A normalisation followed only by affine work and a full spatial sum/mean: the program computes
    the reduction from the normalisation's partial sums instead of normalising every element."""

    def op(self, op_id: int) -> Op:
        return self.ops[op_id]

    def describe(self) -> str:
        """One line per op, for logs and prompts."""
        s = self.spec
        head = (
            f"conv{s.ndim}d{' transposed' if s.transposed else ''} {s.in_channels}->{s.out_channels} "
            f"k={s.kernel_size} s={s.stride} p={s.padding} d={s.dilation} g={s.groups} {s.dtype}"
        )
        lines = [head]
        for op in self.ops[1:]:
            extra = op.attrs.get("fn") or op.attrs.get("kind") or ""
            if op.kind == "operand" and op.operand is not None:
                extra = f"{self.operands[op.operand].expr} ({self.operands[op.operand].kind})"
            if op.kind == "const":
                extra = op.consts[0].expr
            lines.append(f"  %{op.id} = {op.kind} {extra} {op.args}")
        if self.fold is not None:
            lines.append(f"  fold %{self.fold.norm}..%{self.fold.reduce} into the statistics' partial sums")
        lines.append(f"  return %{self.output} as {self.out_groups}")
        return "\n".join(lines)


class ConvConfig(BaseModel):
    """Tile and launch settings of one generated program (the small-step search space)."""

    model_config = ConfigDict(frozen=True)

    BLOCK_M: int = 64
    """Output pixels per tile."""
    BLOCK_N: int = 64
    """Output channels per tile."""
    BLOCK_K: int = 32
    """Reduction (input channels x taps) slice per step; unused by direct_depthwise."""
    BLOCK_W: int = 0
    """direct_depthwise with LAYOUT=nchw: 0 tiles BLOCK_M flat pixels x BLOCK_N channels; > 0 tiles one
    (sample, channel) plane in 2-D: BLOCK_M pixels as rows of up to BLOCK_W output columns (W fastest,
    a whole row when the plane is 1-D), so a tile needs no per-pixel division and its taps reuse per-row
    and per-column offsets and masks. Unused by the GEMM designs."""
    GROUP_M: int = 8
    """Pixel tiles that share a channel tile before moving on (L2 reuse of the input)."""
    num_warps: int = 4
    num_stages: int = 3
    LAYOUT: Literal["nchw", "nhwc"] = "nchw"
    """How the kernel reads the input: nchw as given (pixels along the fast axis of a load), nhwc after
    a copy to channels-last (a tile's channel slice contiguous)."""
    RECOMPUTE: bool = False
    """A normalisation after the convolution's stage: the stage after the statistics recomputes the
    convolution instead of storing its output and reading it back (less memory traffic; pays off when
    the convolution is cheap, e.g. depthwise). Ignored when there is no such normalisation."""
    PERSIST: int = 0
    """The GEMM designs' tiled kernels (not the plane tiles): 0 launches one program per output tile; k > 0
    launches k programs per SM that walk the tiles in one flattened loop (Triton pipelines the next tile's
    loads under this tile's epilogue: short reductions, e.g. 3x3 taps over 64 channels, are few K steps)."""
    X_TMA: bool = False
    """implicit_gemm with LAYOUT=nhwc, a forward convolution with no pooling in its stage: tiles are boxes of
    BLOCK_M output pixels (whole output rows of one depth slice of one sample, up to BLOCK_M columns wide),
    and each tap's input box is read through a tensor descriptor over the channels-last input (Hopper's
    TMA; the descriptor's zero fill is the padding) where the host allows it: a GPU with TMA, stride 1,
    CIN_G a multiple of BLOCK_K, 16-byte aligned strides. Elsewhere the same boxes are gathered through
    pointers."""
    INTERIOR: bool = False
    """direct_depthwise plane tiles: a tile whose taps all lie inside the input (every row and column of it
    an output, no tap in the padding) loads without masks, one runtime branch per tile; edge tiles keep the
    masked loads. The masks are a quarter of a 3 x 3 plane kernel's instructions on sm_90."""
    WORDS: bool = True
    """direct_depthwise plane tiles: each tap row is read as words of two columns (32-bit for fp16/bf16,
    64-bit for fp32) at word offsets around the output pair and split into its halves in registers, instead
    of one load per shifted column (a column one off is not aligned for a wider load); where the host finds
    stride 1 along the width, an even input width and rows aligned to the word. Elsewhere (strided, odd
    widths) the element loads."""
    DOT: Literal["ieee", "tf32x3", "tf32"] = "tf32x3"
    """fp32 inputs: how tl.dot multiplies. ieee: exact fp32 on CUDA cores; tf32x3: three TF32 tensor-core
    products per term (fp32-level accuracy); tf32: one TF32 product (only under --allow-tf32).
    Ignored for fp16/bf16 inputs."""

    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.model_dump().items())
