"""Short Triton notes for the cold tier of the prompt, chosen by relevance to the task and the feedback.

Each note states one fact about writing Triton kernels that a model tends to get wrong, with the op
families and error words it is relevant to. They are written for this project (not copied from the
Triton documentation) and kept short: the context manager spends few tokens on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from pydantic import BaseModel, Field

from kernelwright.memory.embedding import hash_embed


class DocSnippet(BaseModel):
    id: str
    title: str
    text: str
    tags: list[str] = Field(default_factory=list)
    """Op families and error words this note is relevant to."""


DOCS: tuple[DocSnippet, ...] = (
    DocSnippet(
        id="doc-dot-shapes",
        title="tl.dot block shapes",
        text="tl.dot needs 2-D operands whose every block dimension is at least 16 (M, N and K). "
        "Pad small problems with masked loads up to 16 rather than shrinking the block. The accumulator "
        "is usually fp32: acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32); acc += tl.dot(a, b).",
        tags=["matmul", "conv", "compile_error", "dot", "shape"],
    ),
    DocSnippet(
        id="doc-constexpr",
        title="Block sizes are tl.constexpr",
        text="Shapes given to tl.arange, tl.zeros and tl.reshape must be compile-time constants: pass "
        "them as `BLOCK: tl.constexpr` arguments. tl.arange(0, N) needs N to be a power of two; use "
        "triton.next_power_of_2(n) on the host and mask the tail.",
        tags=["compile_error", "arange", "constexpr", "power", "shape", "pointwise", "reduction", "softmax"],
    ),
    DocSnippet(
        id="doc-masks",
        title="Masked loads and stores",
        text="Every load and store whose block may run past the end needs a mask: "
        "tl.load(ptr + offs, mask=offs < n, other=0.0). Choose `other` so the padding is neutral for "
        "the reduction that follows (0 for sums, -inf for max). Out-of-bounds accesses are not "
        "reported; they silently corrupt results.",
        tags=["pointwise", "reduction", "softmax", "norm", "mismatch", "runtime_error"],
    ),
    DocSnippet(
        id="doc-strides",
        title="Strides, not contiguity",
        text="Pass tensor strides to the kernel (x.stride(0), x.stride(1)) and index with them; do not "
        "assume a contiguous row-major layout unless the launcher calls .contiguous() first. Transposed "
        "or sliced inputs are common in reference programs.",
        tags=["matmul", "conv", "pointwise", "mismatch", "stride", "layout"],
    ),
    DocSnippet(
        id="doc-reduction-precision",
        title="Reduce in fp32",
        text="Load half-precision inputs, convert with .to(tl.float32) before summing, and convert back "
        "only when storing. Sums, means, variances and softmax denominators lose accuracy in fp16/bf16.",
        tags=["reduction", "norm", "softmax", "loss", "mismatch", "precision", "float16", "bfloat16"],
    ),
    DocSnippet(
        id="doc-softmax",
        title="Numerically stable softmax",
        text="Subtract the row maximum before tl.exp: m = tl.max(x, axis=0); e = tl.exp(x - m); "
        "y = e / tl.sum(e, axis=0). Load masked lanes with other=-float('inf') so they add nothing. "
        "A row that fits in one block needs a single pass; longer rows need an online max/sum.",
        tags=["softmax", "reduction", "loss", "mismatch", "nan", "inf"],
    ),
    DocSnippet(
        id="doc-grid",
        title="Grids and program ids",
        text="The launch grid is a tuple of at most 3 ints or a lambda META: (...). Use "
        "triton.cdiv(n, META['BLOCK']) so the last partial block is launched. tl.program_id(axis) "
        "returns the block index along that axis; grid axis 1 and 2 are limited to 65535.",
        tags=["pointwise", "matmul", "reduction", "runtime_error", "grid", "launch"],
    ),
    DocSnippet(
        id="doc-no-python-in-kernel",
        title="Only Triton operations inside @triton.jit",
        text="Inside a kernel you cannot call torch functions, Python lists, dicts, print with "
        "f-strings or arbitrary Python helpers; only tl.* operations, arithmetic on tensors and scalars, "
        "and other @triton.jit functions. Loops use range() or tl.static_range() with scalar bounds.",
        tags=["compile_error", "unsupported", "torch", "python", "jit"],
    ),
    DocSnippet(
        id="doc-dtypes",
        title="Matching dtypes",
        text="Binary operations between tensors of different dtypes promote like C, which may not match "
        "torch. Cast explicitly (x.to(tl.float32)) and store in the output tensor's dtype: "
        "tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask).",
        tags=["mismatch", "compile_error", "dtype", "float16", "bfloat16", "pointwise"],
    ),
    DocSnippet(
        id="doc-autotune",
        title="Autotuning",
        text="@triton.autotune(configs=[triton.Config({'BLOCK_M': 128, ...}, num_warps=4, num_stages=3), ...], "
        "key=['M', 'N', 'K']) picks the fastest config per distinct key. Keep the list short; every "
        "config is compiled and timed on first use. Meta-parameters chosen by autotune must not be "
        "passed again at launch.",
        tags=["matmul", "conv", "autotune", "performance", "compile_error"],
    ),
    DocSnippet(
        id="doc-matmul-tiling",
        title="Tiled matmul with grouped ordering",
        text="A fast matmul gives each program a BLOCK_M x BLOCK_N output tile, loops over K in BLOCK_K "
        "steps with tl.dot, and orders program ids in groups of GROUP_M rows so neighbouring programs "
        "reuse the same B tiles from L2. Fuse bias and activation into the epilogue before the store.",
        tags=["matmul", "conv", "performance", "tiling", "epilogue", "fusion"],
    ),
    DocSnippet(
        id="doc-fusion",
        title="Fuse elementwise chains",
        text="Chains of pointwise operations are memory-bound: one kernel that loads each input once, "
        "computes the whole chain in registers and stores once beats one kernel per op. The same holds "
        "for a reduction followed by elementwise work on its result (normalisation, softmax).",
        tags=["pointwise", "norm", "softmax", "performance", "fusion", "memory"],
    ),
    DocSnippet(
        id="doc-atomics",
        title="Atomics and determinism",
        text="tl.atomic_add lets several programs reduce into one output, but the order of additions "
        "varies run to run, so results differ in the last bits and fp16 atomics lose accuracy. Prefer "
        "one program per output row, or a second pass that combines partial results.",
        tags=["reduction", "loss", "mismatch", "atomic", "determinism"],
    ),
    DocSnippet(
        id="doc-shared-memory",
        title="Shared memory and num_stages",
        text="Large BLOCK sizes times num_stages can exceed the shared memory per block; the compiler "
        "then fails with an out-of-resources error. Reduce BLOCK_K or num_stages, or use smaller tiles "
        "for fp32 than for fp16.",
        tags=["matmul", "conv", "compile_error", "resources", "shared", "crash"],
    ),
    DocSnippet(
        id="doc-scan",
        title="Scans",
        text="tl.cumsum(x, axis=0) and tl.associative_scan(x, axis, combine_fn) compute prefix results "
        "within a block. Rows longer than a block need a carry: keep the running total of earlier "
        "blocks in a scalar and add it to the block's scan.",
        tags=["scan", "cumsum", "reduction"],
    ),
    DocSnippet(
        id="doc-conv",
        title="Convolution as implicit GEMM",
        text="A convolution can be computed as a matmul whose K dimension runs over input channels x "
        "kernel height x kernel width, gathering input patches with computed offsets (implicit GEMM) "
        "instead of materialising im2col. Handle padding with masks on the gathered loads.",
        tags=["conv", "matmul", "performance", "tiling"],
    ),
    DocSnippet(
        id="doc-interpreter",
        title="The CPU interpreter",
        text="With TRITON_INTERPRET=1 kernels run on the CPU in numpy: out-of-bounds accesses are not "
        "caught, bf16 tl.dot gives wrong numbers, and timings mean nothing. A kernel that is correct "
        "there can still fail to compile for a GPU.",
        tags=["interpreter", "cpu", "mismatch"],
    ),
)


@lru_cache(maxsize=1)
def _doc_matrix() -> np.ndarray:
    return np.stack([hash_embed(f"{d.title} {d.text} {' '.join(d.tags)}") for d in DOCS])


def select_docs(query: str, *, tags: Sequence[str] = (), k: int = 3) -> list[tuple[DocSnippet, float]]:
    """The k notes most relevant to a query text and tags (op families, error kind), best first."""
    if k <= 0:
        return []
    sims = _doc_matrix() @ hash_embed(query)
    wanted = {t.lower() for t in tags if t}
    scored = []
    for doc, sim in zip(DOCS, sims, strict=True):
        bonus = 0.2 * len(wanted & set(doc.tags))
        scored.append((doc, float(sim) + bonus))
    scored.sort(key=lambda ds: (-ds[1], ds[0].id))
    return scored[:k]
