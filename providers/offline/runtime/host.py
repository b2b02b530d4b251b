"""Host helpers every generic-writer program carries (RUNTIME): integer arithmetic of the launchers, broadcast
shapes and stride walks, and the SM count a persistent grid is sized by (num_sms, also in conv programs)."""

# mypy: disable-error-code="var-annotated"
# mypy: check-untyped-defs
import torch

# the program texts of this module, each between its marker lines (runtime.program_text)
PROGRAM_TEXTS = ("host", "num_sms")

# fmt: off
# program text: host

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

# end of program text: host
# program text: num_sms

_SM_COUNTS = {}


def _num_sms(device):
    if device.type != "cuda":
        return 4
    if device.index not in _SM_COUNTS:
        _SM_COUNTS[device.index] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNTS[device.index]
# end of program text: num_sms
