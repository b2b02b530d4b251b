"""Hopper's warp-specialized "ping-pong" GEMM, written in Gluon, as a helper block of the offline writer's programs.

Triton 3.6 cannot warp-specialize a plain `tl.dot` loop on sm_90 (`tl.range(..., warp_specialize=True)` hangs
there: benchmarks/RESULTS.md, 2026-12-02), so the writer's persistent GEMM stores each output tile while its
tensor cores wait; with a short K that store is a visible share of a tile (the bmm of level1_bf16/16, K = 1024:
0.96-0.97x cuBLAS with two 4-warp programs per SM). Gluon, Triton's lower-level dialect, states partitions,
shared memory and barriers explicitly, and its warp specialization runs on Hopper. The kernel below
(`_kw_ws_gemm_kernel`) is the schedule CUTLASS calls ping-pong:

- one producer warp issues every TMA load, for both consumers' tiles, into one ring of NSTAGE buffers;
- two consumer warpgroups take the program's output tiles in turn (its j-th tile to consumer j % 2), each
  running a tile's products (async wgmma from shared memory) and then its epilogue (the tile in the output
  dtype into its own shared buffer, written by a TMA store) while the other runs the next tile's products;
- an order barrier per consumer serialises the main loops (main loop j starts when j - 1 ends): the tensor
  cores serve one warpgroup at a time, and every ring barrier is at most one phase ahead of its waiter.

The ring counter is global (tile j's k-th step is ring step j * k_steps + k), so the three partitions agree on a
slot and its phase without talking. Registers: 168 per thread at launch (12 warps), moved by the partitions to
240 for each consumer (a 128 x 128 fp32 accumulator is 128 of them) and 24 for the producer.

Operands are read as 2-D matrices: a batch of NB [rows, cols] matrices as one [NB * rows, cols] matrix, which
is exact when no tile straddles two of them (`_kw_ws_view`); a column-major operand through its row-major
transpose, permuted in shared memory for the MMA (A_T, B_T). `_kw_ws_gemm` is the host side: it builds the
descriptors and launches where the product fits (fp16/bf16, an sm_90 GPU, unit-stride layouts, 16-byte aligned
rows) and returns False otherwise, so the program's Triton kernels run instead. Judged on an H200 (`kernelwright
eval`, level1_bf16/16, the bf16 bmm with K = 1024): 1.035-1.048x cuBLAS at 5 stages, 1.001x at 4, where the
two-per-SM Triton program ran 0.964-0.971x; slower than that program at K = 4096-8192 (RESULTS.md, 2026-12-04,
twenty-fourth session; kind_matmul.WS_DEFAULT_MAX_K).

Gluon kernels do not run in Triton's interpreter (CPU): there the program takes its Triton kernels; the
offline compile for an sm_90 target captures and compiles this kernel (hardware.compile_feedback,
KERNELWRIGHT_CAPTURE_WS).
"""

WS_TILE = (128, 128, 64)
"""BLOCK_M, BLOCK_N, BLOCK_K of the ping-pong kernel: one warpgroup's 128 x 128 fp32 accumulator in registers."""

WS_STAGES = (4, 5)
"""Ring depths offered (the `WS` knob): two 32 KiB output buffers plus 32 KiB per stage fit an H100/H200's
227 KiB at 4 and 5."""


def ws_smem_bytes(stages: int, itemsize: int = 2) -> int:
    """Shared memory of the ping-pong kernel at `stages`, an upper bound: the ring, two output tiles and 32 B a
    stage plus 128 for barriers and alignment (compiled for sm_90 by Triton 3.6: the tiles plus 248 B at 4
    stages, 280 B at 5; 232 B at 4 with A read transposed)."""
    bm, bn, bk = WS_TILE
    return stages * ((bm * bk + bk * bn) * itemsize + 32) + 2 * bm * bn * itemsize + 128


WS_GEMM_HELPER = '''
import os

try:  # Gluon: Hopper's warp-specialized ping-pong GEMM (providers/offline/emit_gluon.py), written against
    # Triton 3.6's Gluon API (it changed between releases): older Triton runs the Triton kernels instead
    if tuple(int(p) for p in triton.__version__.split(".")[:2]) < (3, 6):
        raise ImportError("Gluon's API before Triton 3.6")
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia import hopper as glh
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as _GlDesc
except (ImportError, ValueError):
    gluon = None

_KW_WS_TILE = __WS_TILE__  # BLOCK_M, BLOCK_N, BLOCK_K: emit_gluon.WS_TILE
_WS_DEVICES = {}
_WS_LAYOUTS = {}


def _kw_ws_device(t):
    """Whether the ping-pong GEMM can run on t's device: an NVIDIA sm_90 GPU (wgmma is Hopper's own), or an
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
    """How the ping-pong GEMM reads nb [rows, cols] matrices with element strides s ([batch,] row, col): as
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


def _kw_ws_gemm(a, sa, b, sb, out, M, N, K, NB, GROUP, NSTAGE):
    """out[NB, M, N] = a @ b by the ping-pong kernel; False (nothing launched) where it cannot run."""
    BM, BN, BK = _KW_WS_TILE
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
    for t, (shape, strides, box, _) in ((a, va), (b, vb), (out, ([NB * M, N], [N, 1], [BM, BN], False))):
        key = (box[0], box[1], dt)
        layout = _WS_LAYOUTS.get(key)
        if layout is None:  # ~6 us a call in Python: once per tile shape and dtype
            layout = _WS_LAYOUTS[key] = gl.NVMMASharedLayout.get_default_for(box, getattr(gl, dt))
        descs.append(_GlDesc(t, shape, strides, box, layout))
    tiles = _cdiv(M, BM) * _cdiv(N, BN) * NB
    progs = max(1, min(_num_sms(a.device), _cdiv(tiles, 2)))
    _kw_launch(_kw_ws_gemm_kernel, (progs,), *descs, M, N, K, NB,
               BLOCK_K=BK, A_T=va[3], B_T=vb[3], NUM_PROGS=progs, GROUP=GROUP, NSTAGE=NSTAGE,
               num_warps=4, maxnreg=168)
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
                        ROLE: gl.constexpr, BLOCK_K: gl.constexpr, A_T: gl.constexpr, B_T: gl.constexpr,
                        NUM_PROGS: gl.constexpr, GROUP: gl.constexpr):
        BM: gl.constexpr = c_desc.block_type.shape[0]
        BN: gl.constexpr = c_desc.block_type.shape[1]
        NSTAGE: gl.constexpr = a_bufs.type.shape[0]
        num_pid_m = gl.cdiv(M, BM)
        num_pid_n = gl.cdiv(N, BN)
        k_steps = gl.cdiv(K, BLOCK_K)
        step = 0
        for tile in range(gl.program_id(0), num_pid_m * num_pid_n * NB, NUM_PROGS):
            pb, off_m, off_n = _kw_ws_tile(tile, num_pid_m, num_pid_n, BM, BN, GROUP)
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
    def _kw_ws_consumer(a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, order, M, N, K, NB,
                        ROLE: gl.constexpr, BLOCK_K: gl.constexpr, A_T: gl.constexpr, B_T: gl.constexpr,
                        NUM_PROGS: gl.constexpr, GROUP: gl.constexpr):
        BM: gl.constexpr = c_desc.block_type.shape[0]
        BN: gl.constexpr = c_desc.block_type.shape[1]
        NSTAGE: gl.constexpr = a_bufs.type.shape[0]
        layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BN, 16])
        c_smem = c_bufs.index(ROLE)
        my_turn = order.index(ROLE)  # arrived by the other consumer when its main loop ends
        theirs = order.index(1 - ROLE)
        num_pid_m = gl.cdiv(M, BM)
        num_pid_n = gl.cdiv(N, BN)
        k_steps = gl.cdiv(K, BLOCK_K)
        j = ROLE  # the program's local tile index: this consumer takes j = ROLE, ROLE + 2, ...
        lap = 0
        for tile in range(gl.program_id(0) + ROLE * NUM_PROGS, num_pid_m * num_pid_n * NB, 2 * NUM_PROGS):
            pb, off_m, off_n = _kw_ws_tile(tile, num_pid_m, num_pid_n, BM, BN, GROUP)
            # main loop j waits for main loop j - 1, the other consumer's (its barrier's completion lap - 1 +
            # ROLE); consumer 0's first waits for none
            glh.mbarrier.wait(my_turn, (lap + ROLE + 1) & 1, pred=(lap + ROLE) > 0)
            step = j * k_steps
            acc = gl.zeros([BM, BN], gl.float32, layout)
            for kk in range(k_steps):
                s = step % NSTAGE
                glh.mbarrier.wait(ready.index(s), (step // NSTAGE) & 1)
                if A_T:
                    a_tile = a_bufs.index(s).permute((1, 0))
                else:
                    a_tile = a_bufs.index(s)
                if B_T:
                    b_tile = b_bufs.index(s).permute((1, 0))
                else:
                    b_tile = b_bufs.index(s)
                acc = glh.warpgroup_mma(a_tile, b_tile, acc, is_async=True)
                # one product in flight: the step before is done and its slot may be refilled
                acc = glh.warpgroup_mma_wait(1, deps=(acc,))
                glh.mbarrier.arrive(empty.index((step + NSTAGE - 1) % NSTAGE), count=1, pred=kk > 0)
                step += 1
            acc = glh.warpgroup_mma_wait(0, deps=(acc,))
            glh.mbarrier.arrive(empty.index((step + NSTAGE - 1) % NSTAGE), count=1)
            glh.mbarrier.arrive(theirs, count=1)  # the other consumer's next main loop may start
            glh.tma.store_wait(0)  # this consumer's last tile has left c_smem
            c_smem.store(acc.to(c_desc.dtype))
            glh.fence_async_shared()
            glh.tma.async_copy_shared_to_global(c_desc, [pb * M + off_m, off_n], c_smem)
            j += 2
            lap += 1
        glh.tma.store_wait(0)

    @gluon.jit
    def _kw_ws_gemm_kernel(a_desc, b_desc, c_desc, M, N, K, NB, BLOCK_K: gl.constexpr, A_T: gl.constexpr,
                           B_T: gl.constexpr, NUM_PROGS: gl.constexpr, GROUP: gl.constexpr, NSTAGE: gl.constexpr):
        dtype: gl.constexpr = a_desc.dtype
        a_bufs = gl.allocate_shared_memory(dtype, [NSTAGE] + a_desc.block_type.shape, a_desc.layout)
        b_bufs = gl.allocate_shared_memory(dtype, [NSTAGE] + b_desc.block_type.shape, b_desc.layout)
        c_bufs = gl.allocate_shared_memory(dtype, [2] + c_desc.block_type.shape, c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [NSTAGE, 1], glh.mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [NSTAGE, 1], glh.mbarrier.MBarrierLayout())
        order = gl.allocate_shared_memory(gl.int64, [2, 1], glh.mbarrier.MBarrierLayout())
        for i in gl.static_range(NSTAGE):
            glh.mbarrier.init(ready.index(i), count=1)
            glh.mbarrier.init(empty.index(i), count=1)
        for i in gl.static_range(2):
            glh.mbarrier.init(order.index(i), count=1)
        FIRST: gl.constexpr = 0
        SECOND: gl.constexpr = 1
        # each partition's arguments written out: a tuple built by concatenation loses its constexprs
        gl.warp_specialize(
            [
                (_kw_ws_consumer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, order, M, N, K,
                                   NB, FIRST, BLOCK_K, A_T, B_T, NUM_PROGS, GROUP)),
                (_kw_ws_producer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, order, M, N, K,
                                   NB, FIRST, BLOCK_K, A_T, B_T, NUM_PROGS, GROUP)),
                (_kw_ws_consumer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, order, M, N, K,
                                   NB, SECOND, BLOCK_K, A_T, B_T, NUM_PROGS, GROUP)),
            ],
            [1, 4],
            [24, 240],
        )
'''.replace("__WS_TILE__", repr(WS_TILE))
