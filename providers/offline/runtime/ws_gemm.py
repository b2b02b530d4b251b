"""Hopper's warp-specialized Gluon GEMMs and their host side _kw_ws_gemm (emit_gluon.py says how they work)."""

# ruff: noqa: E402
# mypy: disable-error-code="var-annotated"
# mypy: check-untyped-defs
import torch
import triton

from kernelwright.providers.offline.runtime.host import _cdiv, _num_sms
from kernelwright.providers.offline.runtime.launch import _kw_launch

# the program texts of this module, each between its marker lines (runtime.program_text)
PROGRAM_TEXTS = ("_kw_ws_gemm",)

# fmt: off
# program text: _kw_ws_gemm

import os

try:  # Gluon: Hopper's warp-specialized GEMMs (providers/offline/emit/emit_gluon.py), written against
    # Triton 3.6's Gluon API (it changed between releases): older Triton runs the Triton kernels instead
    if tuple(int(p) for p in triton.__version__.split(".")[:2]) < (3, 6):
        raise ImportError("Gluon's API before Triton 3.6")
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia import hopper as glh
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as _GlDesc
except (ImportError, ValueError):
    gluon = None

_KW_WS_TILES = ((128, 128, 64), (128, 256, 64))  # BLOCK_M, BLOCK_N, BLOCK_K: ping-pong's, cooperative's
_WS_DEVICES = {}
_WS_LAYOUTS = {}


def _kw_ws_device(t):
    """Whether the Gluon GEMM can run on t's device: an NVIDIA sm_90 GPU (wgmma is Hopper's own), or an
    offline compile's capture for such a target (meta tensors, KERNELWRIGHT_CAPTURE_WS=1)."""
    if gluon is None:
        return False
    dev = t.device
    ok = _WS_DEVICES.get(dev)
    if ok is None:
        if dev.type == "meta":
            ok = os.environ.get("KERNELWRIGHT_CAPTURE_WS") == "1"
        else:
            ok = dev.type == "cuda" and torch.version.hip is None and torch.cuda.get_device_capability(dev) == (9, 0)
        _WS_DEVICES[dev] = ok
    return ok


def _kw_ws_view(s, rows, cols, nb, b_rows, b_cols, size):
    """How the Gluon GEMM reads nb [rows, cols] matrices with element strides s ([batch,] row, col): as
    (shape, strides, box, transposed) of one 2-D descriptor, or None. Row-major matrices stack as [nb * rows,
    cols], column-major ones through their transposes as [nb * cols, rows]; stacked, a tile must not straddle
    two matrices (rows, or cols, a multiple of its box)."""
    batch = s[0] if len(s) == 3 else 0
    s_row, s_col = s[-2], s[-1]
    if s_col == 1 and (nb == 1 or (batch == rows * s_row and rows % b_rows == 0)):
        shape, strides, box, transposed = [nb * rows, cols], [s_row, 1], [b_rows, b_cols], False
    elif s_row == 1 and (nb == 1 or (batch == cols * s_col and cols % b_cols == 0)):
        shape, strides, box, transposed = [nb * cols, rows], [s_col, 1], [b_cols, b_rows], True
    else:
        return None
    if (strides[0] * size) % 16 or strides[0] < shape[1]:
        return None
    return shape, strides, box, transposed


def _kw_ws_gemm(a, sa, b, sb, out, M, N, K, NB, GROUP, NSTAGE, COOP):
    """out[NB, M, N] = a @ b by the Gluon kernel (ping-pong, or cooperative where COOP); False (nothing
    launched) where it cannot run."""
    BM, BN, BK = _KW_WS_TILES[COOP]
    dt = {torch.float16: "float16", torch.bfloat16: "bfloat16"}.get(a.dtype)
    if dt is None or b.dtype != a.dtype or out.dtype != a.dtype or min(M, N, K, NB) <= 0 or not _kw_ws_device(a):
        return False  # (a descriptor cannot have an empty dim: the Triton kernels take empty products)
    size = a.element_size()
    va = _kw_ws_view(sa, M, K, NB, BM, BK, size)
    vb = _kw_ws_view(sb, K, N, NB, BK, BN, size)
    if va is None or vb is None or (NB > 1 and M % BM) or (N * size) % 16 or not out.is_contiguous():
        return False
    if any(t.data_ptr() % 16 for t in (a, b, out)):
        return False
    descs = []
    c_box = [BM // 2, BN] if COOP else [BM, BN]  # cooperative: each consumer stores its half of the rows
    for t, (shape, strides, box, _) in ((a, va), (b, vb), (out, ([NB * M, N], [N, 1], c_box, False))):
        key = (box[0], box[1], dt)
        layout = _WS_LAYOUTS.get(key)
        if layout is None:  # ~6 us a call in Python: once per tile shape and dtype
            layout = _WS_LAYOUTS[key] = gl.NVMMASharedLayout.get_default_for(box, getattr(gl, dt))
        descs.append(_GlDesc(t, shape, strides, box, layout))
    tiles = _cdiv(M, BM) * _cdiv(N, BN) * NB
    # ping-pong: a program's consumers take its tiles in turn, so two tiles a program at least
    progs = max(1, min(_num_sms(a.device), tiles if COOP else _cdiv(tiles, 2)))
    _kw_launch(_kw_ws_gemm_kernel, (progs,), *descs, M, N, K, NB,
               BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, A_T=va[3], B_T=vb[3], NUM_PROGS=progs, GROUP=GROUP,
               NSTAGE=NSTAGE, COOP=bool(COOP), num_warps=4, maxnreg=168)
    return True


if gluon is not None:

    @gluon.jit
    def _kw_ws_tile(tile, NUM_PID_M, NUM_PID_N, BM: gl.constexpr, BN: gl.constexpr, GROUP: gl.constexpr):
        """(batch, first row, first column) of output tile `tile`: GROUP-row bands of tiles within each batch."""
        per_batch = NUM_PID_M * NUM_PID_N
        pb = tile // per_batch
        t = tile % per_batch
        width = GROUP * NUM_PID_N
        first_m = (t // width) * GROUP
        gsize = gl.minimum(NUM_PID_M - first_m, GROUP)
        return pb, (first_m + (t % width) % gsize) * BM, ((t % width) // gsize) * BN

    @gluon.jit
    def _kw_ws_producer(a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, order, M, N, K, NB,
                        ROLE: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                        A_T: gl.constexpr, B_T: gl.constexpr, NUM_PROGS: gl.constexpr, GROUP: gl.constexpr):
        # every tile of the program, in order, for either schedule
        NSTAGE: gl.constexpr = a_bufs.type.shape[0]
        num_pid_m = gl.cdiv(M, BLOCK_M)
        num_pid_n = gl.cdiv(N, BLOCK_N)
        k_steps = gl.cdiv(K, BLOCK_K)
        step = 0
        for tile in range(gl.program_id(0), num_pid_m * num_pid_n * NB, NUM_PROGS):
            pb, off_m, off_n = _kw_ws_tile(tile, num_pid_m, num_pid_n, BLOCK_M, BLOCK_N, GROUP)
            for kk in range(k_steps):
                s = step % NSTAGE
                # a fresh barrier passes a wait for the phase before its first: the first lap does not wait
                glh.mbarrier.wait(empty.index(s), ((step // NSTAGE) & 1) ^ 1)
                bar = ready.index(s)
                glh.mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
                k = kk * BLOCK_K
                if A_T:
                    glh.tma.async_copy_global_to_shared(a_desc, [pb * K + k, off_m], bar, a_bufs.index(s))
                else:
                    glh.tma.async_copy_global_to_shared(a_desc, [pb * M + off_m, k], bar, a_bufs.index(s))
                if B_T:
                    glh.tma.async_copy_global_to_shared(b_desc, [pb * N + off_n, k], bar, b_bufs.index(s))
                else:
                    glh.tma.async_copy_global_to_shared(b_desc, [pb * K + k, off_n], bar, b_bufs.index(s))
                step += 1

    @gluon.jit
    def _kw_ws_operands(a_bufs, b_bufs, s, ROLE: gl.constexpr, ROWS: gl.constexpr, COOP: gl.constexpr,
                        A_T: gl.constexpr, B_T: gl.constexpr):
        # ring slot s's A and B as the MMA reads them: [ROWS, BLOCK_K] and [BLOCK_K, BLOCK_N]; cooperative, this
        # consumer's ROWS rows of A's tile, from ROLE * ROWS
        a_tile = a_bufs.index(s)
        if COOP:
            a_tile = a_tile.slice(ROLE * ROWS, ROWS, dim=1 if A_T else 0)
        if A_T:
            a_tile = a_tile.permute((1, 0))
        b_tile = b_bufs.index(s)
        if B_T:
            b_tile = b_tile.permute((1, 0))
        return a_tile, b_tile

    @gluon.jit
    def _kw_ws_consumer(a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, order, M, N, K, NB,
                        ROLE: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                        A_T: gl.constexpr, B_T: gl.constexpr, NUM_PROGS: gl.constexpr, GROUP: gl.constexpr,
                        COOP: gl.constexpr):
        # ping-pong: the program's tiles ROLE, ROLE + 2, ... whole, each main loop in turn with the other
        # consumer's; cooperative: every tile of the program, its ROWS rows from ROLE * ROWS
        TURNS: gl.constexpr = 1 if COOP else 2  # consumers taking the program's tiles in turn
        ROWS: gl.constexpr = BLOCK_M // 2 if COOP else BLOCK_M
        FIRST_ROW: gl.constexpr = ROLE * ROWS if COOP else 0
        NSTAGE: gl.constexpr = a_bufs.type.shape[0]
        layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BLOCK_N, 16])
        c_smem = c_bufs.index(ROLE)
        my_turn = order.index(ROLE)  # ping-pong: arrived by the other consumer when its main loop ends
        theirs = order.index(1 - ROLE)
        num_pid_m = gl.cdiv(M, BLOCK_M)
        num_pid_n = gl.cdiv(N, BLOCK_N)
        k_steps = gl.cdiv(K, BLOCK_K)
        j = 0 if COOP else ROLE  # the program's local index of this consumer's tile
        lap = 0
        first = gl.program_id(0) + (0 if COOP else ROLE) * NUM_PROGS
        for tile in range(first, num_pid_m * num_pid_n * NB, TURNS * NUM_PROGS):
            pb, off_m, off_n = _kw_ws_tile(tile, num_pid_m, num_pid_n, BLOCK_M, BLOCK_N, GROUP)
            if not COOP:
                # main loop j waits for main loop j - 1, the other consumer's (its barrier's completion lap -
                # 1 + ROLE); consumer 0's first waits for none
                glh.mbarrier.wait(my_turn, (lap + ROLE + 1) & 1, pred=(lap + ROLE) > 0)
            step = j * k_steps
            acc = gl.zeros([ROWS, BLOCK_N], gl.float32, layout)
            for kk in range(k_steps):
                s = step % NSTAGE
                glh.mbarrier.wait(ready.index(s), (step // NSTAGE) & 1)
                a_tile, b_tile = _kw_ws_operands(a_bufs, b_bufs, s, ROLE, ROWS, COOP, A_T, B_T)
                acc = glh.warpgroup_mma(a_tile, b_tile, acc, is_async=True)
                # one product in flight: the step before is done and its slot may be refilled (cooperative:
                # once both consumers say so, the slot's barrier counting two arrivals)
                acc = glh.warpgroup_mma_wait(1, deps=(acc,))
                glh.mbarrier.arrive(empty.index((step + NSTAGE - 1) % NSTAGE), count=1, pred=kk > 0)
                step += 1
            acc = glh.warpgroup_mma_wait(0, deps=(acc,))
            glh.mbarrier.arrive(empty.index((step + NSTAGE - 1) % NSTAGE), count=1)
            if not COOP:
                glh.mbarrier.arrive(theirs, count=1)  # the other consumer's next main loop may start
            glh.tma.store_wait(0)  # this consumer's last tile (or half tile) has left c_smem
            c_smem.store(acc.to(c_desc.dtype))
            glh.fence_async_shared()
            glh.tma.async_copy_shared_to_global(c_desc, [pb * M + off_m + FIRST_ROW, off_n], c_smem)
            j += TURNS
            lap += 1
        glh.tma.store_wait(0)

    @gluon.jit
    def _kw_ws_gemm_kernel(a_desc, b_desc, c_desc, M, N, K, NB, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                           BLOCK_K: gl.constexpr, A_T: gl.constexpr, B_T: gl.constexpr, NUM_PROGS: gl.constexpr,
                           GROUP: gl.constexpr, NSTAGE: gl.constexpr, COOP: gl.constexpr):
        dtype: gl.constexpr = a_desc.dtype
        a_bufs = gl.allocate_shared_memory(dtype, [NSTAGE] + a_desc.block_type.shape, a_desc.layout)
        b_bufs = gl.allocate_shared_memory(dtype, [NSTAGE] + b_desc.block_type.shape, b_desc.layout)
        c_bufs = gl.allocate_shared_memory(dtype, [2] + c_desc.block_type.shape, c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [NSTAGE, 1], glh.mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [NSTAGE, 1], glh.mbarrier.MBarrierLayout())
        order = gl.allocate_shared_memory(gl.int64, [2, 1], glh.mbarrier.MBarrierLayout())  # ping-pong's
        for i in gl.static_range(NSTAGE):
            glh.mbarrier.init(ready.index(i), count=1)
            glh.mbarrier.init(empty.index(i), count=2 if COOP else 1)
        for i in gl.static_range(2):
            glh.mbarrier.init(order.index(i), count=1)
        FIRST: gl.constexpr = 0
        SECOND: gl.constexpr = 1
        # each partition's arguments written out: a tuple built by concatenation loses its constexprs
        gl.warp_specialize(
            [
                (_kw_ws_consumer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, order, M, N, K,
                                   NB, FIRST, BLOCK_M, BLOCK_N, BLOCK_K, A_T, B_T, NUM_PROGS, GROUP, COOP)),
                (_kw_ws_producer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, order, M, N, K,
                                   NB, FIRST, BLOCK_M, BLOCK_N, BLOCK_K, A_T, B_T, NUM_PROGS, GROUP)),
                (_kw_ws_consumer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, order, M, N, K,
                                   NB, SECOND, BLOCK_M, BLOCK_N, BLOCK_K, A_T, B_T, NUM_PROGS, GROUP, COOP)),
            ],
            [1, 4],
            [24, 240],
        )
# end of program text: _kw_ws_gemm
