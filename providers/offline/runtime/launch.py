"""Host helpers of the launchers: _kw_launch (the cached launch every program uses), the TMA descriptors
(_kw_tma, _kw_tma_box) and the padded layouts (_kw_wrap, _kw_align, _kw_kmajor) matmul programs read through,
copies of parameters kept while they are unchanged (_kw_kept)."""

# ruff: noqa: E402, B905, F841
# mypy: disable-error-code="var-annotated"
# mypy: check-untyped-defs
import torch

# the program texts of this module, each between its marker lines (runtime.program_text)
PROGRAM_TEXTS = ("_kw_launch", "_kw_tma", "_kw_tma_box", "_kw_wrap", "_kw_kept", "_kw_align", "_kw_kmajor")

# fmt: off
# program text: _kw_launch

import os

import triton
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
    returns no compiled kernel), an autotuned kernel and a first launch go through the JIT. Returns what
    a direct launch with these arguments runs, (device, compiled kernel, later parameters, launch), where
    there is one; `launch(grid, args)` makes it (a stitched model's replay launches it so)."""
    key = None
    if _KW_DIRECT:
        key = (kernel, tuple([a if type(a) is int else _kw_arg_key(a) for a in args]), tuple(meta.items()))
        try:
            hit = _KW_COMPILED.get(key)
        except TypeError:  # an unhashable argument: the JIT's launch every time
            key = hit = None
        if hit is not None and hit[0] == torch.cuda.current_device() and not callable(grid):
            hit[3]((*grid, 1, 1)[:3], args)
            return hit
    compiled = kernel[grid](*args, **meta)
    if key is None or not isinstance(kernel, _KwJIT) or not hasattr(compiled, "packed_metadata"):
        return  # the interpreter's launch, an autotuner's (its configs' arguments are not in meta), ...
    if len(_KW_COMPILED) >= 4096:  # arguments that change every call (a float computed per call): start over
        _KW_COMPILED.clear()
    later = kernel.params[len(args):]
    if all(p.name in meta or p.has_default for p in later):
        tail = [meta[p.name] if p.name in meta else p.default for p in later]
        device = torch.cuda.current_device()
        _KW_COMPILED[key] = (device, compiled, tail, _kw_direct(device, compiled, tail))
        return _KW_COMPILED[key]


def _kw_direct(device, compiled, tail):
    """launch(grid, args): `compiled[grid](*args, *tail)` without the runner's per-launch Python (the
    device's and stream's lookups, its launch metadata; on an H100 host, ResNet18's stitched forward with 78
    launches took no measurably less host time: 2.41 against 2.49 ms, within that host's noise). The launcher is read through `compiled.run` each time, as the runner reads it (so whatever
    wraps it, the judge's launch recorder, sees the launch); with a launch hook set (a profiler's: Triton
    3.6's hooks are chains, empty unless one was added), the runner itself, which builds the metadata the
    hook reads."""
    knobs = getattr(triton, "knobs", None)
    stream_of = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if knobs is None or stream_of is None or not hasattr(compiled, "function"):  # another Triton, torch
        return lambda grid, args: compiled[grid](*args, *tail)

    def launch(grid, args):
        if _kw_no_hook(knobs.runtime.launch_enter_hook) and _kw_no_hook(knobs.runtime.launch_exit_hook):
            compiled.run(grid[0], grid[1], grid[2], stream_of(device), compiled.function, compiled.packed_metadata,
                         None, None, None, *args, *tail)
        else:
            compiled[grid](*args, *tail)

    return launch


def _kw_no_hook(hook):
    return hook is None or not getattr(hook, "calls", True)
# end of program text: _kw_launch
# program text: _kw_tma

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
# end of program text: _kw_tma
# program text: _kw_tma_box

def _kw_tma_box(x5, box_h, box_w, box_c):
    """A descriptor over a channels-last 5-D input [N, C, D, H, W] read as [N, D, H, W, C] in
    [1, 1, box_h, box_w, box_c] boxes, or None where TMA cannot (see _kw_tma_device; the channels' stride
    1 and the other strides 16-byte aligned)."""
    sn, sc, sd, sh, sw = x5.stride()
    if sc != 1 or not _kw_tma_device(x5) or any((s * x5.element_size()) % 16 for s in (sn, sd, sh, sw)):
        return None
    n, c, d, h, w = x5.shape
    return _TensorDescriptor(x5, [n, d, h, w, c], [sn, sd, sh, sw, 1], [1, 1, box_h, box_w, box_c])
# end of program text: _kw_tma_box
# program text: _kw_wrap

def _kw_wrap(n, t):
    """Where tile columns of `t` (last dim n, unit stride) may wrap: n rounded up to 16 where t's storage
    holds every row that far (an _kw_align copy's padding; reading past n there is safe, those outputs
    are masked), else n."""
    up = -(-n // 16) * 16
    if up == n or t.stride(-1) != 1:
        return n
    last = t.storage_offset() + sum((s - 1) * st for s, st in zip(t.shape[:-1], t.stride()[:-1])) + up - 1
    return up if last < t.untyped_storage().nbytes() // t.element_size() else n
# end of program text: _kw_wrap
# program text: _kw_kept

import os
import weakref

_KW_KEPT = {}
# KERNELWRIGHT_KEEP_COPIES=0: every layout copy made on every call
_KW_KEEP = os.environ.get("KERNELWRIGHT_KEEP_COPIES", "1") != "0"


def _kw_kept(t, make):
    """make(t), a layout copy of t; where t is a parameter or a view of one (a Linear's weight.T), the copy is
    kept and given again while that parameter is the same object with the same storage and version (an
    in-place update, an optimizer's step or load_state_dict, makes it again), so a weight whose rows are
    not aligned is copied once, not on every call. A change made through `.data` bypasses the version
    counter and is not seen; the copy is made without autograd (kernels launched from Python have none).
    """
    base = t if t._base is None else t._base
    if not _KW_KEEP or not isinstance(base, torch.nn.Parameter) or t.device.type not in ("cuda", "cpu"):
        return make(t)
    try:
        state = (base.data_ptr(), base._version)
    except RuntimeError:  # an inference tensor (made under inference_mode) counts no versions: not kept
        return make(t)
    key = (id(base), t.shape, t.stride(), t.storage_offset(), t.dtype, make)
    hit = _KW_KEPT.get(key)
    if hit is not None:
        ref, made_from, out = hit
        if ref() is base and made_from == state:
            return out
    with torch.no_grad():
        out = make(t)
    if len(_KW_KEPT) >= 256:  # parameters that keep changing: start over
        _KW_KEPT.clear()

    def forget(_, key=key):  # the copy goes when its parameter does (a model deleted, a parameter replaced)
        _KW_KEPT.pop(key, None)

    _KW_KEPT[key] = (weakref.ref(base, forget), state, out)
    return out
# end of program text: _kw_kept
# program text: _kw_align

def _kw_align(t):
    """t, or a copy whose matrix rows start a multiple of 16 elements apart (a padded buffer viewed back
    to t's shape).

    Triton vectorizes a tile load only where it can prove the rows aligned, and it knows an integer
    argument (a stride) only as divisible by 16 or not: a row stride of 5921 or 5924 fp32 elements keeps
    every tile load scalar. One copy costs far less than that in a large product. A matrix stored
    column-major is aligned the same way along its columns.
    """
    if t.dim() < 2:
        return t
    size = t.element_size()
    if t.stride(-1) != 1 and t.stride(-2) == 1 and t.shape[-2] > 1:
        m = t.mT
        u = _kw_align(m)
        return t if u is m else u.mT
    if t.stride(-1) != 1 or t.shape[-1] == 1 or t.dim() > 2 and t.stride(-3) == 0:
        return t
    if t.stride(-2) % 16 == 0 and t.data_ptr() % 16 == 0:
        return t
    return _kw_kept(t, _kw_aligned_copy)


def _kw_aligned_copy(t):
    cols = -(-t.shape[-1] // 16) * 16
    buf = torch.empty(*t.shape[:-1], cols, dtype=t.dtype, device=t.device)
    out = buf[..., : t.shape[-1]]
    out.copy_(t)
    return out
# end of program text: _kw_align
# program text: _kw_kmajor

def _kw_kmajor(b):
    """b ([..., K, N]) read K-major, as tensor-core dots read B: b itself where its K stride is 1, else one
    copy whose columns are K-contiguous and start a multiple of 16 elements apart (a padded buffer viewed back
    to b's shape). A transposing copy then an aligning one (_kw_align) wrote B twice at an odd K: on an H100,
    gen/08's bmm at 11 x 191 x 767 by 767 x 191 spent 25 us of its 71 us on three operand copies."""
    if b.stride(-2) == 1 or b.shape[-2] <= 1:
        return b
    return _kw_kept(b, _kw_kmajor_copy)


def _kw_kmajor_copy(b):
    k = b.shape[-2]
    rows = -(-k // 16) * 16
    buf = torch.empty(*b.shape[:-2], b.shape[-1], rows, dtype=b.dtype, device=b.device)
    out = buf[..., :k]
    out.copy_(b.mT)
    return out.mT
# end of program text: _kw_kmajor
