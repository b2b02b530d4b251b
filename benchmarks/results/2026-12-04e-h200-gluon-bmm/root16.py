# kernelwright: family=matmul design=persistent config=BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=4,num_stages=3,TMA=1,FLAT=1,PER_SM=2
"""large step: matmul kernel as persistent (default design); 1 Triton kernel, shape-generic."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


# Host helpers of the launchers. A forward's host work is paid on every call and, for a kernel of tens of
# microseconds, is what a timer measures: they stay plain int and tuple arithmetic (triton.cdiv and
# triton.next_power_of_2 are jit functions, several microseconds a call from Python, and
# torch.broadcast_shapes goes through torch's reference implementation), and the stride walk below is
# done once per input shape and layout.


def _cdiv(a, b):
    return -(-a // b)


def _np2(n):
    """triton.next_power_of_2 for a host int (0 for n <= 0, as it)."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


def _bshapes(*shapes):
    """torch.broadcast_shapes for shapes of ints, as a tuple."""
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for i, d in enumerate(s, n - len(s)):
            if d != 1:
                if out[i] != 1 and out[i] != d:
                    raise RuntimeError(f"shapes {[tuple(x) for x in shapes]} do not broadcast")
                out[i] = d
    return tuple(out)


def _walk_strides(t, shape, groups):
    for copy in (False, True):
        st = (t.contiguous() if copy else t).expand(shape).stride()
        out = []
        for g in groups:
            stride, step = 0, None
            for d in reversed(g):
                if shape[d] == 1:
                    continue
                if step is None:
                    stride = st[d]
                elif st[d] != step:
                    break
                step = st[d] * shape[d]
            else:
                out.append(stride)
                continue
            break
        else:
            return copy, out
    raise AssertionError("a contiguous tensor always walks with one stride per group")


_STRIDE_WALKS = {}


def _group_strides(t, shape, groups):
    """(tensor, element strides of it broadcast to `shape`, one per group of dims walked as one).

    A group is a run of dims; it can be walked with one stride when each dim's stride is the next one's
    stride times its size. A view that breaks this (a rare permuted layout) is copied to contiguous
    first, and the copy is what the kernel must read: always use the returned tensor. The walk is
    remembered per (shape, strides, target shape, groups).
    """
    key = (t.shape, t.stride(), tuple(shape), str(groups))
    walk = _STRIDE_WALKS.get(key)
    if walk is None:
        if len(_STRIDE_WALKS) > 4096:
            _STRIDE_WALKS.clear()
        walk = _STRIDE_WALKS[key] = _walk_strides(t, shape, groups)
    copy, out = walk
    return (t.contiguous() if copy else t), list(out)


def _prod(values):
    p = 1
    for v in values:
        p *= v
    return p


_SM_COUNTS = {}


def _num_sms(device):
    if device.type != "cuda":
        return 4
    if device.index not in _SM_COUNTS:
        _SM_COUNTS[device.index] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNTS[device.index]

import os

from triton.runtime.jit import JITFunction as _KwJIT

_KW_COMPILED = {}
# KERNELWRIGHT_DIRECT_LAUNCH=0: every launch through Triton's JIT
_KW_DIRECT = os.environ.get("KERNELWRIGHT_DIRECT_LAUNCH", "1") != "0"


def _kw_arg_key(a):
    """What Triton specializes a launch argument on, for an argument that is not an int (an int is its own
    key): a tensor's dtype, device and 16-byte alignment; a descriptor's dtype, block and alignment; a
    float, bool or string tagged with its type (True, 1 and 1.0 are equal keys in a dict otherwise)."""
    if isinstance(a, torch.Tensor):
        return (a.dtype, a.get_device(), a.data_ptr() % 16 == 0)
    if a is None:
        return None
    if hasattr(a, "block_shape") and hasattr(a, "base"):  # a host tensor descriptor
        return ("desc", a.base.dtype, a.base.get_device(), a.base.data_ptr() % 16 == 0, tuple(a.block_shape),
                getattr(a, "padding", None))
    return (type(a).__name__, a)


def _kw_launch(kernel, grid, *args, **meta):
    """kernel[grid](*args, **meta). After a GPU launch through Triton's JIT, the compiled kernel it returned
    is kept under a key that holds every int argument's value and every other argument's kind (finer than
    Triton's own specialization, which sees an int only as 1, a multiple of 16 or neither), and a launch
    with an equal key on the same device runs that compiled kernel at once, with the kernel's later
    parameters (block sizes, defaults) appended as the JIT appends them. The interpreter (whose launch
    returns no compiled kernel), an autotuned kernel and a first launch go through the JIT."""
    key = None
    if _KW_DIRECT:
        key = (kernel, tuple([a if type(a) is int else _kw_arg_key(a) for a in args]), tuple(meta.items()))
        try:
            hit = _KW_COMPILED.get(key)
        except TypeError:  # an unhashable argument: the JIT's launch every time
            key = hit = None
        if hit is not None and hit[0] == torch.cuda.current_device() and not callable(grid):
            hit[1][(*grid, 1, 1)[:3]](*args, *hit[2])
            return
    compiled = kernel[grid](*args, **meta)
    if key is None or not isinstance(kernel, _KwJIT) or not hasattr(compiled, "packed_metadata"):
        return  # the interpreter's launch, an autotuner's (its configs' arguments are not in meta), ...
    if len(_KW_COMPILED) >= 4096:  # arguments that change every call (a float computed per call): start over
        _KW_COMPILED.clear()
    later = kernel.params[len(args):]
    if all(p.name in meta or p.has_default for p in later):
        tail = [meta[p.name] if p.name in meta else p.default for p in later]
        _KW_COMPILED[key] = (torch.cuda.current_device(), compiled, tail)

import os

try:  # Hopper's tensor-memory-accelerator loads, through descriptors built on the host (Triton >= 3.4)
    from triton.tools.tensor_descriptor import TensorDescriptor as _TensorDescriptor
except ImportError:
    _TensorDescriptor = None

_TMA_DEVICES = {}


def _kw_tma_device(t):
    """Whether descriptors can read t: Triton has them, t's device has TMA and t's base is 16-byte aligned."""
    if _TensorDescriptor is None:
        return False
    dev = t.device
    ok = _TMA_DEVICES.get(dev)
    if ok is None:
        # the CPU runs Triton's interpreter, which reads descriptors too; meta tensors are an offline
        # compile's capture, whose target says (KERNELWRIGHT_CAPTURE_TMA); ROCm GPUs report CUDA-like
        # capabilities, but Hopper's TMA is NVIDIA's
        nvidia = dev.type == "cuda" and torch.version.hip is None
        ok = (
            dev.type == "cpu"
            or (dev.type == "meta" and os.environ.get("KERNELWRIGHT_CAPTURE_TMA") == "1")
            or (nvidia and torch.cuda.get_device_capability(dev)[0] >= 9)
        )
        _TMA_DEVICES[dev] = ok
    return ok and t.data_ptr() % 16 == 0


def _kw_tma(t, rows, cols, s_row, s_col, b_row, b_col, batch=0, s_batch=0):
    """(descriptor, transposed) that reads t's [rows, cols] matrix (element strides s_row, s_col) in
    [b_row, b_col] tiles, or None where TMA cannot: no descriptor support, a GPU before sm_90, neither
    stride 1, or a base or stride not 16-byte aligned (then the pointer kernel runs). transposed: the
    descriptor walks the stored transpose ([cols, rows] in [b_col, b_row] tiles), and the kernel
    transposes each tile back. batch > 0: a 3-D descriptor over `batch` such matrices s_batch apart,
    read in [1, ...] boxes.
    """
    if not _kw_tma_device(t):
        return None
    size = t.element_size()
    if batch and (s_batch <= 0 or (s_batch * size) % 16):
        return None
    lead = ([batch], [s_batch], [1]) if batch else ([], [], [])
    if s_col == 1 and s_row > 0 and (s_row * size) % 16 == 0:
        shape, strides, box, transposed = [rows, cols], [s_row, 1], [b_row, b_col], False
    elif s_row == 1 and s_col > 0 and (s_col * size) % 16 == 0:
        shape, strides, box, transposed = [cols, rows], [s_col, 1], [b_col, b_row], True
    else:
        return None
    return _TensorDescriptor(t, lead[0] + shape, lead[1] + strides, lead[2] + box), transposed

def _kw_wrap(n, t):
    """Where tile columns of `t` (last dim n, unit stride) may wrap: n rounded up to 16 where t's storage
    holds every row that far (an _kw_align copy's padding; reading past n there is safe, those outputs
    are masked), else n."""
    up = -(-n // 16) * 16
    if up == n or t.stride(-1) != 1:
        return n
    last = t.storage_offset() + sum((s - 1) * st for s, st in zip(t.shape[:-1], t.stride()[:-1])) + up - 1
    return up if last < t.untyped_storage().nbytes() // t.element_size() else n


@triton.jit
def k0_matmul(
    a_ptr,
    b_ptr,
    out0,
    M,
    N,
    K,
    NB,
    WN,
    G0,
    G1,
    G2,
    sa0,
    sa1,
    sak,
    sb0,
    sbk,
    sbn,
    out0_s0,
    out0_s1,
    out0_s2,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    HINT_M: tl.constexpr,
    HINT_N: tl.constexpr,
    NUM_PROGS: tl.constexpr,
):
    total = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N) * NB
    for tile_id in tl.range(tl.program_id(0), total, NUM_PROGS, flatten=True):
        tile = tile_id
        num_pid_m = tl.cdiv(M, BLOCK_M)
        num_pid_n = tl.cdiv(N, BLOCK_N)
        pb = tile // (num_pid_m * num_pid_n)
        t = tile % (num_pid_m * num_pid_n)
        width = GROUP_M * num_pid_n
        first_m = (t // width) * GROUP_M
        gsize = tl.minimum(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + (t % width) % gsize
        pid_n = (t % width) // gsize
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rmw = rm % M
        rnw = rn % WN
        if HINT_M:
            rmw = tl.max_contiguous(tl.multiple_of(rmw, BLOCK_M), BLOCK_M)
        if HINT_N:
            rnw = tl.max_contiguous(tl.multiple_of(rnw, BLOCK_N), BLOCK_N)
        a_row = pb * sa0 + rmw * sa1
        rk = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + a_row[:, None] + (0 + rk[None, :]) * sak
        b_base = pb * sb0
        b_ptrs = b_ptr + b_base + (0 + rk[:, None]) * sbk + rnw[None, :] * sbn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        k_main = 0 + (K - 0) // BLOCK_K * BLOCK_K
        for k0 in range(0, k_main, BLOCK_K):
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * sak
            b_ptrs += BLOCK_K * sbk
        if k_main < K:
            kmask = (k_main + rk) < K
            a = tl.load(a_ptrs, mask=kmask[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=kmask[:, None], other=0.0)
            acc = tl.dot(a, b, acc)
        omask = (rm[:, None] < M) & (rn[None, :] < N)
        tl.store(out0 + pb * out0_s0 + rm[:, None] * out0_s1 + rn[None, :] * out0_s2, (acc.to(tl.bfloat16).to(tl.float32)).to(tl.bfloat16), mask=omask)

@triton.jit
def k0_matmul_tma(
    a_desc,
    b_desc,
    out0,
    M,
    N,
    K,
    NB,
    WN,
    G0,
    G1,
    G2,
    out0_s0,
    out0_s1,
    out0_s2,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    HINT_M: tl.constexpr,
    HINT_N: tl.constexpr,
    A_T: tl.constexpr,
    B_T: tl.constexpr,
    NUM_PROGS: tl.constexpr,
):
    total = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N) * NB
    for tile_id in tl.range(tl.program_id(0), total, NUM_PROGS, flatten=True):
        tile = tile_id
        num_pid_m = tl.cdiv(M, BLOCK_M)
        num_pid_n = tl.cdiv(N, BLOCK_N)
        pb = tile // (num_pid_m * num_pid_n)
        t = tile % (num_pid_m * num_pid_n)
        width = GROUP_M * num_pid_n
        first_m = (t // width) * GROUP_M
        gsize = tl.minimum(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + (t % width) % gsize
        pid_n = (t % width) // gsize
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        om = pid_m * BLOCK_M
        on = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            if A_T:
                a = a_desc.load([pb, k0, om]).reshape(BLOCK_K, BLOCK_M).T
            else:
                a = a_desc.load([pb, om, k0]).reshape(BLOCK_M, BLOCK_K)
            if B_T:
                b = b_desc.load([pb, on, k0]).reshape(BLOCK_N, BLOCK_K).T
            else:
                b = b_desc.load([pb, k0, on]).reshape(BLOCK_K, BLOCK_N)
            acc = tl.dot(a, b, acc)
        omask = (rm[:, None] < M) & (rn[None, :] < N)
        tl.store(out0 + pb * out0_s0 + rm[:, None] * out0_s1 + rn[None, :] * out0_s2, (acc.to(tl.bfloat16).to(tl.float32)).to(tl.bfloat16), mask=omask)


def _launch_k0_matmul(a, b):
    batch = tuple(_bshapes(a.shape[:-2], b.shape[:-2]))
    shape = batch + (a.shape[-2], b.shape[-1])
    K, N = a.shape[-1], b.shape[-1]
    groups = [[0], [1], [2]]
    G0 = _prod(shape[d] for d in [0])
    G1 = _prod(shape[d] for d in [1])
    G2 = _prod(shape[d] for d in [2])
    M = _prod(shape[d] for g in [[1]] for d in g)
    NB = _prod(shape[d] for g in [[0]] for d in g)
    a, sa = _group_strides(a, batch + (a.shape[-2], K), [[0], [1], [2]])
    b, sb = _group_strides(b, batch + (K, N), [[0], [1], [2]])
    out0 = torch.empty(shape, device=a.device, dtype=torch.bfloat16)
    _, stout0 = _group_strides(out0, shape, groups)
    WN = min(_kw_wrap(N, x) for x in (b,))
    BLOCK_M = min(128, max(16, _np2(M)))
    BLOCK_N = min(128, max(16, _np2(N)))
    BLOCK_K = min(64, max(16, _np2(K)))
    tiles = _cdiv(M, BLOCK_M) * _cdiv(N, BLOCK_N) * NB
    NUM_PROGS = max(1, min(tiles, 2 * _num_sms(a.device)))
    td = [_kw_tma(a, M, K, sa[1], sa[2], BLOCK_M, BLOCK_K, NB, sa[0])]
    td.append(_kw_tma(b, K, N, sb[1], sb[2], BLOCK_K, BLOCK_N, NB, sb[0]))
    if all(d is not None for d in td):
        _kw_launch(k0_matmul_tma, (NUM_PROGS,),
            td[0][0], td[1][0], out0, M, N, K, NB, WN, G0, G1, G2, stout0[0], stout0[1], stout0[2],
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=8, HINT_M=M % 16 == 0, HINT_N=WN % 16 == 0, NUM_PROGS=NUM_PROGS, A_T=td[0][1], B_T=td[1][1], num_warps=4, num_stages=3,
        )
        return out0,
    _kw_launch(k0_matmul, (NUM_PROGS,),
        a, b, out0, M, N, K, NB, WN, G0, G1, G2, sa[0], sa[1], sa[2], sb[0], sb[1], sb[2], stout0[0], stout0[1], stout0[2],
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=8, HINT_M=M % 16 == 0, HINT_N=WN % 16 == 0, NUM_PROGS=NUM_PROGS, num_warps=4, num_stages=3,
    )
    return out0,


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.to(torch.bfloat16)

    def forward(self, A: torch.Tensor, B: torch.Tensor):
        t2, = _launch_k0_matmul(A, B)
        return t2

