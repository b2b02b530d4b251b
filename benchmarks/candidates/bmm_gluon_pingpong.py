"""A hand-written candidate for level1_bf16/16 (bmm): a warp-specialized persistent GEMM in Gluon, for sm_90.

Triton 3.6's automatic warp specialization hangs on Hopper (RESULTS.md, 2026-12-02), and the writer's persistent
GEMM (two 4-warp programs per SM, each loading, multiplying and storing in turn) is 3% behind cuBLAS on this
task, whose K = 1024 makes each 128 x 128 tile only 16 steps long, so a tile's epilogue is a visible share.
This program is the Hopper "ping-pong" schedule written out in Gluon (Triton's lower-level dialect, where
partitions, shared memory and barriers are explicit):

- one producer warp issues every TMA load, for the tiles of both consumers, into one ring of STAGES buffers;
- two consumer warpgroups take output tiles in turn (tile j to consumer j % 2); each runs its tile's products
  (async wgmma from shared memory) and then its epilogue (bf16 into its own shared buffer, written by a TMA
  store), while the other warpgroup runs the next tile's products;
- an order barrier per consumer serialises the main loops (mainloop j starts after mainloop j - 1 ends), which
  keeps the tensor cores with one warpgroup at a time and every ring barrier within one phase of its waiter.

The ring counter is global: tile j's k-th step is ring step j * k_steps + k, so both consumers and the
producer agree on a slot and its phase without talking. Requires M % BLOCK_M == 0 and K % BLOCK_K == 0 (A and
B are read as [batch * M, K] and [batch * K, N] matrices; C written as [batch * M, N]); otherwise, on a
device without TMA, or for other dtypes, forward falls back to torch.bmm (this is a probe, not the writer).
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
STAGES = 4
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
        tma.store_wait(0)  # this consumer's last tile has left c_smem
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [row, col], c_smem)
        j += 2
        lap += 1
    tma.store_wait(0)


@gluon.jit
def bmm_pingpong_kernel(
    a_desc, b_desc, c_desc, M, N, K, NB, NUM_PROGS: gl.constexpr, GROUP: gl.constexpr, NSTAGE: gl.constexpr
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


def _usable(a, b):
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
    )


def bmm_pingpong(a, b, stages=STAGES, group=GROUP_M):
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
    bmm_pingpong_kernel[(progs,)](
        a_desc,
        b_desc,
        c_desc,
        m,
        n,
        k,
        nb,
        NUM_PROGS=progs,
        GROUP=group,
        NSTAGE=stages,
        num_warps=4,
        maxnreg=168,
    )
    return c


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.to(torch.bfloat16)

    def forward(self, A: torch.Tensor, B: torch.Tensor):
        if not _usable(A, B):
            return torch.bmm(A, B)
        return bmm_pingpong(A, B)
