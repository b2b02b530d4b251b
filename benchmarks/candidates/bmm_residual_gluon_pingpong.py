"""A hand-written candidate for level2_bf16/06 (bmm * scale + residual): the Gluon ping-pong bmm with the epilogue.

benchmarks/candidates/bmm_gluon_pingpong.py (and the writer's `WS` kernel, providers/offline/emit/emit_gluon.py) beat
cuBLAS on the K = 1024 bmm of level1_bf16/16, but take no epilogue, so the writer's program for this task (the same
bmm, then `* scale + residual`) stays the two-per-SM Triton program (1.53x eager, 1.26x torch.compile, 0.481 ms in
RESULTS.md's twenty-fourth session). Here each consumer applies the epilogue in registers before its TMA store:
the residual tile is read with plain loads in the accumulator's layout, a latency the other consumer's main loop
hides. Rounding as the reference's: the product rounded to bf16, then scale and residual in fp32, rounded once
(the scale is a power of two, so bf16 * scale is exact). Judged on an H200 (RESULTS.md, twenty-fifth session):
0.4535 ms against the writer's 0.4553 in the same call, no gain, so the writer keeps its Triton program. Requires what
the bmm candidate requires, and a contiguous bf16 residual of the output's shape; otherwise forward runs torch.
"""

import torch
import torch.nn as nn
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64
STAGES = 5  # the bmm's best in the judge (RESULTS.md, twenty-fourth session)
GROUP_M = 8


@gluon.jit
def _tile_origin(tile, M, N, NUM_PID_M, NUM_PID_N, BM: gl.constexpr, BN: gl.constexpr, GROUP: gl.constexpr):
    """(row of A and C in the [batch * M] view, column of B and C, batch) of output tile `tile`, grouped by
    GROUP rows of tiles within each batch."""
    per_batch = NUM_PID_M * NUM_PID_N
    pb = tile // per_batch
    t = tile % per_batch
    width = GROUP * NUM_PID_N
    first_m = (t // width) * GROUP
    gsize = gl.minimum(NUM_PID_M - first_m, GROUP)
    pid_m = first_m + (t % width) % gsize
    pid_n = (t % width) // gsize
    return pb * M + pid_m * BM, pid_n * BN, pb


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
    order,
    M,
    N,
    K,
    NB,
    r_ptr,
    scale,
    ROLE: gl.constexpr,
    NUM_PROGS: gl.constexpr,
    GROUP: gl.constexpr,
):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    NSTAGE: gl.constexpr = a_bufs.type.shape[0]
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    total = num_pid_m * num_pid_n * NB
    k_steps = gl.cdiv(K, BK)
    step = 0
    for tile in range(gl.program_id(0), total, NUM_PROGS):
        row, col, pb = _tile_origin(tile, M, N, num_pid_m, num_pid_n, BM, BN, GROUP)
        for kk in range(k_steps):
            s = step % NSTAGE
            # a fresh barrier counts as having completed the phase before phase 0: the first lap passes
            mbarrier.wait(empty.index(s), ((step // NSTAGE) & 1) ^ 1)
            bar = ready.index(s)
            mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [row, kk * BK], bar, a_bufs.index(s))
            tma.async_copy_global_to_shared(b_desc, [pb * K + kk * BK, col], bar, b_bufs.index(s))
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
    order,
    M,
    N,
    K,
    NB,
    r_ptr,
    scale,
    ROLE: gl.constexpr,
    NUM_PROGS: gl.constexpr,
    GROUP: gl.constexpr,
):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    NSTAGE: gl.constexpr = a_bufs.type.shape[0]
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16]
    )
    c_smem = c_bufs.index(ROLE)
    my_turn = order.index(ROLE)  # arrived by the other consumer when its main loop ends
    theirs_done = order.index(1 - ROLE)
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    total = num_pid_m * num_pid_n * NB
    k_steps = gl.cdiv(K, BK)
    j = ROLE  # this program's local tile index: consumer ROLE takes j = ROLE, ROLE + 2, ...
    lap = 0
    for tile in range(gl.program_id(0) + ROLE * NUM_PROGS, total, 2 * NUM_PROGS):
        row, col, pb = _tile_origin(tile, M, N, num_pid_m, num_pid_n, BM, BN, GROUP)
        # main loop j waits for main loop j - 1 (the other consumer's): completion number lap - 1 + ROLE of
        # the other's barrier; consumer 0's first main loop waits for nobody
        mbarrier.wait(my_turn, (lap + ROLE + 1) & 1, pred=(lap + ROLE) > 0)
        step = j * k_steps
        acc = gl.zeros([BM, BN], gl.float32, layout)
        for kk in range(k_steps):
            s = step % NSTAGE
            mbarrier.wait(ready.index(s), (step // NSTAGE) & 1)
            acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
            # at most one product in flight: the previous step's is done, its slot can be refilled
            acc = warpgroup_mma_wait(1, deps=(acc,))
            mbarrier.arrive(empty.index((step + NSTAGE - 1) % NSTAGE), count=1, pred=kk > 0)
            step += 1
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(empty.index((step + NSTAGE - 1) % NSTAGE), count=1)
        mbarrier.arrive(theirs_done, count=1)  # the other consumer's next main loop may start
        # the epilogue, before waiting on the last store: the residual's loads overlap its drain
        rows = row + gl.arange(0, BM, layout=gl.SliceLayout(1, layout))
        cols = col + gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
        inside = (rows[:, None] < NB * M) & (cols[None, :] < N)
        res = gl.load(r_ptr + rows.to(gl.int64)[:, None] * N + cols[None, :], mask=inside, other=0.0)
        out = acc.to(c_desc.dtype).to(gl.float32) * scale + res.to(gl.float32)
        tma.store_wait(0)  # this consumer's last tile has left c_smem
        c_smem.store(out.to(c_desc.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [row, col], c_smem)
        j += 2
        lap += 1
    tma.store_wait(0)


@gluon.jit
def bmm_residual_pingpong_kernel(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    NB,
    r_ptr,
    scale,
    NUM_PROGS: gl.constexpr,
    GROUP: gl.constexpr,
    NSTAGE: gl.constexpr,
):
    dtype: gl.constexpr = a_desc.dtype
    a_bufs = gl.allocate_shared_memory(dtype, [NSTAGE] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(dtype, [NSTAGE] + b_desc.block_type.shape, b_desc.layout)
    c_bufs = gl.allocate_shared_memory(dtype, [2] + c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NSTAGE, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NSTAGE, 1], mbarrier.MBarrierLayout())
    order = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NSTAGE):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    for i in gl.static_range(2):
        mbarrier.init(order.index(i), count=1)
    FIRST: gl.constexpr = 0
    SECOND: gl.constexpr = 1
    gl.warp_specialize(
        [
            (
                _consumer,
                (
                    a_desc,
                    b_desc,
                    c_desc,
                    a_bufs,
                    b_bufs,
                    c_bufs,
                    ready,
                    empty,
                    order,
                    M,
                    N,
                    K,
                    NB,
                    r_ptr,
                    scale,
                    FIRST,
                    NUM_PROGS,
                    GROUP,
                ),
            ),
            (
                _producer,
                (
                    a_desc,
                    b_desc,
                    c_desc,
                    a_bufs,
                    b_bufs,
                    c_bufs,
                    ready,
                    empty,
                    order,
                    M,
                    N,
                    K,
                    NB,
                    r_ptr,
                    scale,
                    FIRST,
                    NUM_PROGS,
                    GROUP,
                ),
            ),
            (
                _consumer,
                (
                    a_desc,
                    b_desc,
                    c_desc,
                    a_bufs,
                    b_bufs,
                    c_bufs,
                    ready,
                    empty,
                    order,
                    M,
                    N,
                    K,
                    NB,
                    r_ptr,
                    scale,
                    SECOND,
                    NUM_PROGS,
                    GROUP,
                ),
            ),
        ],
        [1, 4],
        [24, 240],
    )


_SMS = {}


def _num_sms(device):
    if device.index not in _SMS:
        _SMS[device.index] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SMS[device.index]


def _usable(a, b, r):
    return (
        a.is_cuda
        and torch.cuda.get_device_capability(a.device)[0] == 9
        and a.dtype == b.dtype == torch.bfloat16
        and a.dim() == 3
        and b.dim() == 3
        and a.shape[0] == b.shape[0]
        and a.shape[2] == b.shape[1]
        and a.is_contiguous()
        and b.is_contiguous()
        and a.shape[1] % BLOCK_M == 0
        and a.shape[2] % BLOCK_K == 0
        and b.shape[2] % 8 == 0
        and r.dtype == a.dtype
        and r.shape == (a.shape[0], a.shape[1], b.shape[2])
        and r.is_contiguous()
    )


def bmm_residual_pingpong(a, b, r, scale, stages=STAGES, group=GROUP_M):
    nb, m, k = a.shape
    n = b.shape[2]
    c = torch.empty((nb, m, n), device=a.device, dtype=a.dtype)
    gdt = gl.bfloat16
    a_desc = TensorDescriptor.from_tensor(
        a.view(nb * m, k), [BLOCK_M, BLOCK_K], gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], gdt)
    )
    b_desc = TensorDescriptor.from_tensor(
        b.view(nb * k, n), [BLOCK_K, BLOCK_N], gl.NVMMASharedLayout.get_default_for([BLOCK_K, BLOCK_N], gdt)
    )
    c_desc = TensorDescriptor.from_tensor(
        c.view(nb * m, n), [BLOCK_M, BLOCK_N], gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_N], gdt)
    )
    tiles = (m // BLOCK_M) * triton.cdiv(n, BLOCK_N) * nb
    progs = max(1, min(_num_sms(a.device), triton.cdiv(tiles, 2)))
    bmm_residual_pingpong_kernel[(progs,)](
        a_desc,
        b_desc,
        c_desc,
        m,
        n,
        k,
        nb,
        r,
        float(scale),
        NUM_PROGS=progs,
        GROUP=group,
        NSTAGE=stages,
        num_warps=4,
        maxnreg=168,
    )
    return c


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.to(torch.bfloat16)

    def forward(self, A: torch.Tensor, B: torch.Tensor, residual: torch.Tensor):
        if not _usable(A, B, residual):
            return torch.bmm(A, B) * self.scale + residual
        return bmm_residual_pingpong(A, B, residual, self.scale)
