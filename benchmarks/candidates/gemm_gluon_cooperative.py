"""A hand-written candidate for the long-K bf16 GEMMs (level1_bf16/14, 15, 17): a warp-specialized *cooperative*
persistent GEMM in Gluon, for sm_90. Judged on an H200 (RESULTS.md, twenty-fifth session; results/2026-12-04f-h200-
gluon-coop/run1): 14 1.501 ms against the writer's 1.537, 15 0.375 against 0.392, 17 0.369 against 0.379; the writer
now emits this schedule (providers/offline/emit/emit_gluon.py, COOP).

The ping-pong kernel the writer emits (providers/offline/emit/emit_gluon.py: two consumer warpgroups on 128 x 128 tiles
in turn) beat cuBLAS on the K = 1024 bmm but lost at K = 2048-8192 (RESULTS.md, twenty-fourth session): one
warpgroup's 128 x 128 tile reads more shared memory per product than a 128 x 256 tile does. Here both consumer
warpgroups work on one 128 x 256 tile, each on 64 of its rows (a 64 x 256 fp32 accumulator, 128 registers a
thread), and share each stage's B tile; one producer warp keeps a ring of 4 stages (48 KiB each) filled across
tiles, so the next tile's loads run during this tile's epilogue; each consumer stores its 64 x 256 half with one
TMA store through a 32 KiB buffer of its own (3 stages and the buffers: 208 KiB of an H200's 227).

The question it answers: does a warp-specialized 128 x 256 kernel beat the writer's Triton program (two 4-warp
programs of 128 x 128 tiles per SM: 14 1.02x, 15 1.02x, 17 0.98-0.99x cuBLAS)? Plain 2-D products only, A
row-major or, with TRANSPOSED_A (set for 17, whose A is stored [K, M]), transposed; otherwise forward falls back
to torch.matmul (a probe, not the writer).
"""

import torch
import torch.nn as nn
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper as glh
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

BLOCK_M, BLOCK_N, BLOCK_K = 128, 256, 64
STAGES = 3
TRANSPOSED_A = False  # True for level1_bf16/17 (A.T @ B)
GROUP_M = 8


@gluon.jit
def _tile(tile, NUM_PID_M, NUM_PID_N, BM: gl.constexpr, BN: gl.constexpr, GROUP: gl.constexpr):
    width = GROUP * NUM_PID_N
    first_m = (tile // width) * GROUP
    gsize = gl.minimum(NUM_PID_M - first_m, GROUP)
    return (first_m + (tile % width) % gsize) * BM, ((tile % width) // gsize) * BN


@gluon.jit
def _producer(
    a_desc,
    b_desc,
    c_desc,
    a_bufs,
    b_bufs,
    c_bufs,
    ready,
    empty,
    M,
    N,
    K,
    ROLE: gl.constexpr,
    A_T: gl.constexpr,
    NUM_PROGS: gl.constexpr,
    GROUP: gl.constexpr,
):
    BM: gl.constexpr = 128
    BN: gl.constexpr = b_desc.block_type.shape[1]
    BK: gl.constexpr = b_desc.block_type.shape[0]
    NSTAGE: gl.constexpr = a_bufs.type.shape[0]
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    step = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, NUM_PROGS):
        off_m, off_n = _tile(tile, num_pid_m, num_pid_n, BM, BN, GROUP)
        for k in range(0, K, BK):
            s = step % NSTAGE
            glh.mbarrier.wait(empty.index(s), ((step // NSTAGE) & 1) ^ 1)
            bar = ready.index(s)
            glh.mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            if A_T:
                glh.tma.async_copy_global_to_shared(a_desc, [k, off_m], bar, a_bufs.index(s))
            else:
                glh.tma.async_copy_global_to_shared(a_desc, [off_m, k], bar, a_bufs.index(s))
            glh.tma.async_copy_global_to_shared(b_desc, [k, off_n], bar, b_bufs.index(s))
            step += 1


@gluon.jit
def _consumer(
    a_desc,
    b_desc,
    c_desc,
    a_bufs,
    b_bufs,
    c_bufs,
    ready,
    empty,
    M,
    N,
    K,
    ROLE: gl.constexpr,
    A_T: gl.constexpr,
    NUM_PROGS: gl.constexpr,
    GROUP: gl.constexpr,
):
    BM: gl.constexpr = 128
    HALF: gl.constexpr = 64  # this consumer's rows of the tile: ROLE * 64 ..
    BN: gl.constexpr = b_desc.block_type.shape[1]
    BK: gl.constexpr = b_desc.block_type.shape[0]
    NSTAGE: gl.constexpr = a_bufs.type.shape[0]
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16]
    )
    c_smem = c_bufs.index(ROLE)
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    step = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, NUM_PROGS):
        off_m, off_n = _tile(tile, num_pid_m, num_pid_n, BM, BN, GROUP)
        acc = gl.zeros([HALF, BN], gl.float32, layout)
        for k in range(0, K, BK):
            s = step % NSTAGE
            glh.mbarrier.wait(ready.index(s), (step // NSTAGE) & 1)
            if A_T:
                a_tile = a_bufs.index(s).slice(ROLE * HALF, HALF, dim=1).permute((1, 0))
            else:
                a_tile = a_bufs.index(s).slice(ROLE * HALF, HALF, dim=0)
            acc = glh.warpgroup_mma(a_tile, b_bufs.index(s), acc, is_async=True)
            acc = glh.warpgroup_mma_wait(1, deps=(acc,))
            # both consumers release a slot (its barrier counts two arrivals)
            glh.mbarrier.arrive(empty.index((step + NSTAGE - 1) % NSTAGE), count=1, pred=k > 0)
            step += 1
        acc = glh.warpgroup_mma_wait(0, deps=(acc,))
        glh.mbarrier.arrive(empty.index((step + NSTAGE - 1) % NSTAGE), count=1)
        glh.tma.store_wait(0)  # this consumer's last tile has left c_smem
        c_smem.store(acc.to(c_desc.dtype))
        glh.fence_async_shared()
        glh.tma.async_copy_shared_to_global(c_desc, [off_m + ROLE * HALF, off_n], c_smem)
    glh.tma.store_wait(0)


@gluon.jit
def gemm_cooperative_kernel(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    A_T: gl.constexpr,
    NUM_PROGS: gl.constexpr,
    GROUP: gl.constexpr,
    NSTAGE: gl.constexpr,
):
    dtype: gl.constexpr = a_desc.dtype
    a_bufs = gl.allocate_shared_memory(dtype, [NSTAGE] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(dtype, [NSTAGE] + b_desc.block_type.shape, b_desc.layout)
    c_bufs = gl.allocate_shared_memory(dtype, [2] + c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NSTAGE, 1], glh.mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NSTAGE, 1], glh.mbarrier.MBarrierLayout())
    for i in gl.static_range(NSTAGE):
        glh.mbarrier.init(ready.index(i), count=1)
        glh.mbarrier.init(empty.index(i), count=2)
    FIRST: gl.constexpr = 0
    SECOND: gl.constexpr = 1
    gl.warp_specialize(
        [
            (_consumer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, M, N, K, FIRST, A_T,
                         NUM_PROGS, GROUP)),
            (_producer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, M, N, K, FIRST, A_T,
                         NUM_PROGS, GROUP)),
            (_consumer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, M, N, K, SECOND, A_T,
                         NUM_PROGS, GROUP)),
        ],
        [1, 4],
        [24, 240],
    )  # fmt: skip


_SMS = {}


def _num_sms(device):
    if device.index not in _SMS:
        _SMS[device.index] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SMS[device.index]


def _layout(block):
    return gl.NVMMASharedLayout.get_default_for(block, gl.bfloat16)


def gemm_cooperative(a, b, a_transposed, stages=STAGES, group=GROUP_M):
    """a @ b for bf16 2-D a (or a.T, stored row-major [K, M], where a_transposed) and row-major b."""
    m = a.shape[1] if a_transposed else a.shape[0]
    k, n = b.shape
    c = torch.empty((m, n), device=b.device, dtype=b.dtype)
    a_block = [BLOCK_K, BLOCK_M] if a_transposed else [BLOCK_M, BLOCK_K]
    a_desc = TensorDescriptor.from_tensor(a, a_block, _layout(a_block))
    b_desc = TensorDescriptor.from_tensor(b, [BLOCK_K, BLOCK_N], _layout([BLOCK_K, BLOCK_N]))
    c_desc = TensorDescriptor.from_tensor(c, [64, BLOCK_N], _layout([64, BLOCK_N]))
    tiles = triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N)
    progs = max(1, min(_num_sms(b.device), tiles))
    gemm_cooperative_kernel[(progs,)](
        a_desc, b_desc, c_desc, m, n, k, A_T=a_transposed, NUM_PROGS=progs, GROUP=group, NSTAGE=stages,
        num_warps=4, maxnreg=168,
    )  # fmt: skip
    return c


def _usable(a, b):
    return (
        a.is_cuda
        and torch.cuda.get_device_capability(a.device) == (9, 0)
        and a.dtype == b.dtype == torch.bfloat16
        and a.dim() == b.dim() == 2
        and b.is_contiguous()
        and all(x % 8 == 0 for x in (*a.shape, *b.shape))
    )


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.to(torch.bfloat16)

    def forward(self, A: torch.Tensor, B: torch.Tensor):
        if not _usable(A, B) or not A.is_contiguous():
            return torch.matmul(A.T if TRANSPOSED_A else A, B)
        return gemm_cooperative(A, B, TRANSPOSED_A)
