"""Hopper's warp-specialized GEMMs ("ping-pong" and "cooperative"), written in Gluon, as a helper block of the
offline writer's programs.

Triton 3.6 cannot warp-specialize a plain `tl.dot` loop on sm_90 (`tl.range(..., warp_specialize=True)` hangs
there: benchmarks/RESULTS.md, 2026-12-02), so the writer's persistent GEMM stores each output tile while its
tensor cores wait; with a short K that store is a visible share of a tile (the bmm of level1_bf16/16, K = 1024:
0.96-0.97x cuBLAS with two 4-warp programs per SM). Gluon, Triton's lower-level dialect, states partitions,
shared memory and barriers explicitly, and its warp specialization runs on Hopper. The kernel of
runtime/ws_gemm.py (`_kw_ws_gemm_kernel`) is the schedule CUTLASS calls ping-pong:

- one producer warp issues every TMA load, for both consumers' tiles, into one ring of NSTAGE buffers;
- two consumer warpgroups take the program's output tiles in turn (its j-th tile to consumer j % 2), each
  running a tile's products (async wgmma from shared memory) and then its epilogue (the tile in the output
  dtype into its own shared buffer, written by a TMA store) while the other runs the next tile's products;
- an order barrier per consumer serialises the main loops (main loop j starts when j - 1 ends): the tensor
  cores serve one warpgroup at a time, and every ring barrier is at most one phase ahead of its waiter.

The ring counter is global (tile j's k-th step is ring step j * k_steps + k), so the three partitions agree on a
slot and its phase without talking. Registers: 168 per thread at launch (12 warps), moved by the partitions to
240 for each consumer (a 128 x 128 fp32 accumulator is 128 of them) and 24 for the producer.

With `COOP` the same producer feeds the schedule CUTLASS calls cooperative: both consumer warpgroups work on one
128 x 256 tile, each on 64 of its rows (a 64 x 256 accumulator, again 128 registers), sharing each stage's B
tile, and each stores its half through a 64 x 256 buffer of its own; a ring slot is free when both have read it.
Per product it reads less shared memory than a 128 x 128 tile does, which is what a long K needs; its store is
not overlapped with the tile's products (only with the next tile's loads). Three stages fit (208 KiB).

Operands are read as 2-D matrices: a batch of NB [rows, cols] matrices as one [NB * rows, cols] matrix, which
is exact when no tile straddles two of them (`_kw_ws_view`); a column-major operand through its row-major
transpose, permuted in shared memory for the MMA (A_T, B_T). `_kw_ws_gemm` is the host side: it builds the
descriptors and launches where the product fits (fp16/bf16, an sm_90 GPU, unit-stride layouts, 16-byte aligned
rows) and returns False otherwise, so the program's Triton kernels run instead. Judged on an H200 (`kernelwright
eval`, vs cuBLAS; RESULTS.md, 2026-12-04, twenty-fourth and twenty-fifth sessions; kind_matmul.WS_DEFAULT_MAX_K):
ping-pong on level1_bf16/16, the bf16 bmm with K = 1024: 1.035-1.048x at 5 stages, 1.001x at 4, where the
two-per-SM Triton program ran 0.964-0.971x, but slower than that program at K = 4096-8192; cooperative (a
hand-written twin) at K = 2048-8192: 2.4-4.2% faster than that program (level1_bf16/14, 15, 17: 1.028x, 1.026x,
1.007x).

Gluon kernels do not run in Triton's interpreter (CPU): there the program takes its Triton kernels; the
offline compile for an sm_90 target captures and compiles this kernel (hardware.compile.feedback,
KERNELWRIGHT_CAPTURE_WS).
"""

from kernelwright.providers.offline.runtime import program_text

WS_TILE = (128, 128, 64)
"""BLOCK_M, BLOCK_N, BLOCK_K of the ping-pong kernel: one warpgroup's 128 x 128 fp32 accumulator in registers."""

WS_COOP_TILE = (128, 256, 64)
"""The cooperative kernel's tile (`COOP`): two warpgroups' 64 x 256 fp32 accumulators."""

WS_STAGES = (3, 4, 5)
"""Ring depths offered (the `WS` knob). Ping-pong: two 32 KiB output buffers plus 32 KiB per stage fit an
H100/H200's 227 KiB at 3-5; cooperative: two 32 KiB output buffers plus 48 KiB per stage, at 3."""


def ws_smem_bytes(stages: int, itemsize: int = 2, coop: bool = False) -> int:
    """Shared memory of the Gluon kernel at `stages`, an upper bound: the ring, two output buffers (a tile each
    for ping-pong, half a tile each for cooperative) and 32 B a stage plus 128 for barriers and alignment
    (compiled for sm_90 by Triton 3.6: ping-pong's tiles plus 248 B at 4 stages, 280 B at 5, 232 B at 4 with A
    read transposed; the cooperative twin's 213184 B at 3 stages against 213216 counted here)."""
    bm, bn, bk = WS_COOP_TILE if coop else WS_TILE
    out_tiles = 1 if coop else 2  # two halves of one tile, or two tiles
    return stages * ((bm * bk + bk * bn) * itemsize + 32) + out_tiles * bm * bn * itemsize + 128


# The kernels and their host side are program text in runtime/ws_gemm.py, with the tiles above written
# into it as _KW_WS_TILES (a unit test holds the two equal).
WS_GEMM_HELPER = program_text("ws_gemm", "_kw_ws_gemm")
