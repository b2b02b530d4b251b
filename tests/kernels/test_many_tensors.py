"""A model with hundreds of parameter and buffer tensors is judged like any other.

Every state tensor crosses to the candidate process as its own descriptor, and every buffer comes back
as one: far more than one message of a Unix socket may carry (the receiver's cap per message, and the
kernel's SCM_MAX_FD of 253). A deep narrow model such as ResNet101 (~500 tensors) must still load.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

import pytest

from kernelwright.hardware import WorkerPool
from kernelwright.hardware.isolation.channel import MAX_FDS, MAX_FRAME_FDS, Channel, ProtocolError, close_fds
from kernelwright.tasks import load_task_source

LAYERS = 100  # 100 x (weight, bias, buffer) = 300 state tensors

TASK = f"""
import torch
import torch.nn as nn


class Layer(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.register_buffer("shift", torch.randn(width) * 0.01)

    def forward(self, x):
        return torch.relu(self.linear(x) + self.shift)


class Model(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.Sequential(*[Layer(width) for _ in range(depth)])

    def forward(self, x):
        return self.layers(x)


def get_inputs():
    return [torch.randn(5, 8)]


def get_init_inputs():
    return [8, {LAYERS}]
"""

CANDIDATE = (
    TASK.split("def get_inputs")[0].replace("class Model(", "class _Layers(")
    + """
import triton
import triton.language as tl


@triton.jit
def shift_relu_kernel(y_ptr, shift_ptr, out_ptr, n, width, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask) + tl.load(shift_ptr + offs % width, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(y, 0.0), mask=mask)


class ModelNew(_Layers):
    # torch's matmul for each layer, its shift and ReLU in one Triton kernel
    def forward(self, x):
        for layer in self.layers:
            y = torch.nn.functional.linear(x, layer.linear.weight, layer.linear.bias).contiguous()
            x = torch.empty_like(y)
            shift_relu_kernel[(triton.cdiv(y.numel(), 64),)](y, layer.shift, x, y.numel(), y.shape[-1], BLOCK=64)
        return x
"""
)


@pytest.mark.slow  # ~5 s
def test_model_with_300_state_tensors_is_judged(pool: WorkerPool):
    task = load_task_source(TASK, "task_many_tensors")
    t0 = time.perf_counter()
    res = pool.evaluate(task, CANDIDATE)
    assert res.correct, f"{res.stage} {res.error_kind}: {res.error}"
    print(f"judged a {3 * LAYERS}-tensor model in {time.perf_counter() - t0:.1f} s")


EXITS_QUIETLY = CANDIDATE.replace(
    "class ModelNew(_Layers):\n",
    "class ModelNew(_Layers):\n    def __init__(self, *args):\n        os._exit(0)\n\n",
).replace("import triton\n", "import os\nimport triton\n", 1)


def test_candidate_that_exits_with_status_0_says_what_it_was_doing(pool: WorkerPool):
    res = pool.evaluate(load_task_source(TASK, "task_many_tensors"), EXITS_QUIETLY)
    assert (res.stage, res.error_kind) == ("compile", "crash"), res.error
    assert "exited with status 0" in res.error and "'load' request" in res.error, res.error


# ----------------------------------------------------------------------------- the channel itself
def _memfds(n: int) -> list[int]:
    return [os.memfd_create(f"t{i}", os.MFD_CLOEXEC) for i in range(n)]


def test_a_frame_carries_more_descriptors_than_one_message_may():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    sent = _memfds(300)
    try:
        for i, fd in enumerate(sent):
            os.write(fd, str(i).encode())
        tx, rx = Channel(a), Channel(b)
        writer = threading.Thread(target=tx.send, args=({"op": "x", "n": 300}, sent))
        writer.start()
        got = rx.recv(timeout=10)
        writer.join()
        assert got is not None
        msg, fds = got
        assert msg == {"op": "x", "n": 300} and len(fds) == 300
        assert [os.pread(fd, 8, 0) for fd in fds] == [str(i).encode() for i in range(300)]  # in order
        close_fds(fds)
    finally:
        close_fds(sent)
        a.close()
        b.close()


def test_a_message_with_too_many_descriptors_is_still_refused():
    # What a hostile peer sends with raw sendmsg: one message over MAX_FDS, or a frame over MAX_FRAME_FDS
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    fds = _memfds(MAX_FDS + 1)
    try:
        frame = b'{"op":"x"}'
        socket.send_fds(a, [struct.pack("!I", len(frame)) + frame], fds)
        with pytest.raises(ProtocolError, match="file descriptors came with one message"):
            Channel(b).recv(timeout=10)
        with pytest.raises(ProtocolError, match="over the"):
            Channel(a).send({"op": "x"}, fds * (MAX_FRAME_FDS // len(fds) + 1))
    finally:
        close_fds(fds)
        a.close()
        b.close()


def test_a_frame_over_the_descriptor_limit_is_refused():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    fds = _memfds(MAX_FDS)
    frame = b'{"op":"x"}' + b" " * (MAX_FRAME_FDS // MAX_FDS + 1)
    data = struct.pack("!I", len(frame)) + frame
    try:
        writer = threading.Thread(
            target=lambda: [socket.send_fds(a, [data[i : i + 1]], fds) for i in range(len(data))]
        )
        writer.start()
        with pytest.raises(
            ProtocolError, match=f"more than {MAX_FRAME_FDS} file descriptors came with a frame"
        ):
            Channel(b).recv(timeout=10)
        b.close()
        writer.join()
    finally:
        close_fds(fds)
        a.close()
