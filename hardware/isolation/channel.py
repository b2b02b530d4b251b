"""What crosses between the judge and a candidate process: JSON frames, and tensors in shared memory.

The judge never unpickles anything a candidate process sends. Every frame is a length-prefixed UTF-8
JSON object of bounded size; file descriptors travel beside a frame (SCM_RIGHTS) and are checked by
the receiver before use. Tensors never cross as objects: the sender writes a tensor's bytes into a
memfd (an anonymous shared memory file) and sends the descriptor with a plain description (shape,
dtype); the receiver maps it and builds its own plain `torch.Tensor` over the bytes.

Outputs from a candidate process arrive *sealed*: the candidate side writes the bytes, drops its own
mapping and adds F_SEAL_WRITE, F_SEAL_SHRINK, F_SEAL_GROW and F_SEAL_SEAL, which the kernel refuses
while any writable mapping of the file exists. The judge checks the seals before it maps the file, so
no process (a child the candidate left behind included) can change an output while it is compared.

On a GPU the bytes are staged through host memory (each side copies between its own device memory
and the memfd); neither process ever maps the other's device memory.
"""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import select
import socket
import struct
import time
from collections.abc import Sequence
from typing import Any

import torch

MAX_FRAME_BYTES = 8 * 1024 * 1024
"""The largest frame either side accepts; a longer one is a protocol violation."""
MAX_FDS = 64
"""The most descriptors one message of the socket may carry (a message carrying more is refused by the
receiver, MSG_CTRUNC; the kernel itself refuses more than SCM_MAX_FD, 253, in one sendmsg)."""
MAX_FRAME_FDS = 3072
"""The most descriptors one frame may carry, spread over messages of at most MAX_FDS each: the state of a
model with hundreds of parameter and buffer tensors per shape (ResNet101 has ~500), under the candidate
process's RLIMIT_NOFILE (4096, hardware/isolation/confine.py)."""
_HEADER = struct.Struct("!I")
_OUTPUT_SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL

DTYPES: dict[str, torch.dtype] = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.complex128,
        torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
    )
}  # fmt: skip
"""The dtypes a tensor may have to cross the boundary, by name."""


class ProtocolError(Exception):
    """The other side broke the protocol: a malformed, oversized or unexpected frame or descriptor."""


class ChannelClosed(Exception):
    """The other side closed its end (or died)."""


class Channel:
    """One end of a Unix stream socket carrying JSON frames with optional file descriptors."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.setblocking(True)

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, msg: dict[str, Any], fds: Sequence[int] = ()) -> None:
        data = json.dumps(msg, separators=(",", ":"), allow_nan=True).encode()
        if len(data) > MAX_FRAME_BYTES:
            raise ProtocolError(f"frame of {len(data)} bytes is over the {MAX_FRAME_BYTES}-byte limit")
        fds = list(fds)
        if len(fds) > MAX_FRAME_FDS:
            raise ProtocolError(
                f"a frame with {len(fds)} descriptors is over the {MAX_FRAME_FDS}-descriptor limit"
            )
        groups = [fds[i : i + MAX_FDS] for i in range(0, len(fds), MAX_FDS)]
        # Each message of descriptors rides on at least one byte of the frame; JSON allows trailing blanks.
        data += b" " * max(0, len(groups) - _HEADER.size - len(data))
        frame = _HEADER.pack(len(data)) + data
        try:
            sent = 0
            # All but the last group on one byte each: the receiver's recvmsg stops after a message that
            # carried descriptors, so it never sees more than MAX_FDS at once.
            for i, group in enumerate(groups):
                chunk = frame[sent:] if i == len(groups) - 1 else frame[sent : sent + 1]
                sent += socket.send_fds(self.sock, [chunk], group)
            if sent < len(frame):
                self.sock.sendall(frame[sent:])
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ChannelClosed(str(exc)) from None

    def poll(self, timeout: float | None) -> bool:
        """Whether a frame (or EOF) is ready within `timeout` seconds (None: wait)."""
        ready, _, _ = select.select([self.sock], [], [], timeout)
        return bool(ready)

    def recv(self, timeout: float | None = None) -> tuple[dict[str, Any], list[int]] | None:
        """The next frame and the descriptors sent with it; None when `timeout` passes first.

        Raises ChannelClosed at EOF and ProtocolError for anything malformed (descriptors that came
        with a bad frame are closed).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self.poll(timeout):
            return None
        fds: list[int] = []
        try:
            header = self._read(_HEADER.size, fds, deadline)
            (length,) = _HEADER.unpack(header)
            if length > MAX_FRAME_BYTES:
                raise ProtocolError(f"frame of {length} bytes announced; the limit is {MAX_FRAME_BYTES}")
            body = self._read(length, fds, deadline)
            try:
                msg = json.loads(body.decode())
            except (UnicodeDecodeError, ValueError) as exc:
                raise ProtocolError(f"frame is not JSON: {exc}") from None
            if not isinstance(msg, dict):
                raise ProtocolError(f"frame is a JSON {type(msg).__name__}, not an object")
        except BaseException:
            close_fds(fds)
            raise
        return msg, fds

    def _read(self, n: int, fds: list[int], deadline: float | None) -> bytes:
        chunks: list[bytes] = []
        got = 0
        while got < n:
            if deadline is not None and not self.poll(max(0.0, deadline - time.monotonic())):
                raise ProtocolError("a frame stopped arriving half-way")
            try:
                data, new_fds, flags, _ = socket.recv_fds(self.sock, n - got, MAX_FDS)
            except ConnectionResetError:
                data, new_fds, flags = b"", [], 0
            fds.extend(new_fds)
            if flags & socket.MSG_CTRUNC:
                raise ProtocolError(f"more than {MAX_FDS} file descriptors came with one message of a frame")
            if len(fds) > MAX_FRAME_FDS:
                raise ProtocolError(f"more than {MAX_FRAME_FDS} file descriptors came with a frame")
            if not data:
                raise ChannelClosed("the other side closed the connection")
            chunks.append(data)
            got += len(data)
        return b"".join(chunks)


def close_fds(fds: Sequence[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


# ----------------------------------------------------------------------------- tensors in shared memory
def tensor_nbytes(shape: Sequence[int], dtype: torch.dtype) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n * torch.empty((), dtype=dtype).element_size()


def describe_tensor(t: torch.Tensor) -> dict[str, Any]:
    return {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}


def parse_description(desc: Any) -> tuple[list[int], torch.dtype]:
    """(shape, dtype) from a tensor description another process sent; ProtocolError when malformed."""
    if not isinstance(desc, dict):
        raise ProtocolError("a tensor description is not an object")
    shape, dtype = desc.get("shape"), desc.get("dtype")
    if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                              for s in shape) or len(shape) > 16:  # fmt: skip
        raise ProtocolError(f"bad tensor shape {shape!r}")
    if dtype not in DTYPES:
        raise ProtocolError(f"tensor dtype {dtype!r} cannot cross the boundary")
    return shape, DTYPES[dtype]


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    """The tensor's elements as a flat uint8 tensor on its device (a view where possible)."""
    flat = t.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8, device=t.device)


def map_fd(fd: int, nbytes: int, *, writable: bool) -> tuple[torch.Tensor, mmap.mmap | None]:
    """A flat uint8 tensor over the first `nbytes` of a memfd (and the mapping, to close later)."""
    if nbytes == 0:
        return torch.empty(0, dtype=torch.uint8), None
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
    mm = mmap.mmap(fd, nbytes, mmap.MAP_SHARED, prot)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a read-only buffer is what we mean
        flat = torch.frombuffer(mm, dtype=torch.uint8, count=nbytes)
    return flat, mm


def tensor_to_memfd(t: torch.Tensor, name: str = "kw-tensor", *, seal: bool = False) -> int:
    """A new memfd holding the tensor's bytes (copied from any device); sealed against writes if asked.

    The mapping used to write is dropped before sealing, so the seal can be added.
    """
    nbytes = t.numel() * t.element_size()
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        if nbytes:
            os.ftruncate(fd, nbytes)
            flat, mm = map_fd(fd, nbytes, writable=True)
            flat.copy_(_as_bytes(t))
            del flat
            assert mm is not None
            mm.close()
        if seal:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _OUTPUT_SEALS)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_sealed(fd: int, nbytes: int) -> None:
    """ProtocolError unless `fd` is a memfd of exactly `nbytes` that nobody can write any more."""
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError as exc:
        raise ProtocolError(f"an output descriptor is not a sealable memfd ({exc.strerror})") from None
    if seals & _OUTPUT_SEALS != _OUTPUT_SEALS:
        raise ProtocolError("an output memfd is not sealed against writes")
    size = os.fstat(fd).st_size
    if size != nbytes:
        raise ProtocolError(f"an output memfd holds {size} bytes, its description says {nbytes}")


class SharedTensor:
    """A tensor over a memfd's bytes, with the mapping kept alive as long as this object."""

    def __init__(self, fd: int, shape: Sequence[int], dtype: torch.dtype, *, writable: bool) -> None:
        self.fd = fd
        self.shape, self.dtype = list(shape), dtype
        self.nbytes = tensor_nbytes(shape, dtype)
        flat, self._mm = map_fd(fd, self.nbytes, writable=writable)
        self.tensor = flat.view(dtype).reshape(self.shape) if self.nbytes else torch.empty(shape, dtype=dtype)

    @classmethod
    def create(cls, like: torch.Tensor, name: str = "kw-tensor") -> SharedTensor:
        """A writable shared copy of `like` (any device), in a new memfd that is not sealed."""
        fd = tensor_to_memfd(like, name)
        return cls(fd, list(like.shape), like.dtype, writable=True)

    def description(self) -> dict[str, Any]:
        return {"shape": self.shape, "dtype": str(self.dtype).removeprefix("torch.")}

    def fill_from(self, t: torch.Tensor) -> None:
        """Overwrite the shared bytes with `t`'s (same shape and dtype, any device)."""
        if self.nbytes:
            self.tensor.view(-1).view(torch.uint8).copy_(_as_bytes(t))

    def close(self) -> None:
        self.tensor = torch.empty(0)
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # a view still exists somewhere; the mapping goes with it
                pass
            self._mm = None
        close_fds([self.fd])
        self.fd = -1

    def __del__(self) -> None:
        if getattr(self, "fd", -1) >= 0:
            self.close()


# ----------------------------------------------------------------------------- values
_PLAIN = (bool, int, float, str, type(None))


def encode_value(value: Any, tensors: list[torch.Tensor], depth: int = 0) -> Any:
    """A JSON form of an input, init argument or output; tensors are appended to `tensors` and named by
    their index there. Raises TypeError for a value that cannot cross (an arbitrary object)."""
    if depth > 16:
        raise TypeError("value nested too deeply")
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return {"T": len(tensors) - 1, **describe_tensor(value)}
    if isinstance(value, _PLAIN):
        return {"V": value}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.Size | tuple):
        return {"U": [encode_value(v, tensors, depth + 1) for v in value]}
    if isinstance(value, list):
        return {"L": [encode_value(v, tensors, depth + 1) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"D": [[k, encode_value(v, tensors, depth + 1)] for k, v in value.items()]}
    raise TypeError(f"a {type(value).__name__} cannot cross to the candidate process")


def decode_value(obj: Any, tensors: Sequence[Any], depth: int = 0) -> Any:
    """The inverse of encode_value; `tensors[i]` stands for {"T": i}. ProtocolError when malformed."""
    if depth > 16 or not isinstance(obj, dict) or len(obj) < 1:
        raise ProtocolError("malformed value")
    if "T" in obj:
        i = obj["T"]
        if not isinstance(i, int) or not 0 <= i < len(tensors):
            raise ProtocolError("a value names a tensor that did not come with it")
        return tensors[i]
    if "V" in obj:
        v = obj["V"]
        if not isinstance(v, _PLAIN):
            raise ProtocolError("malformed plain value")
        return v
    if "dtype" in obj:
        if obj["dtype"] not in DTYPES:
            raise ProtocolError("unknown dtype")
        return DTYPES[obj["dtype"]]
    for tag, kind in (("U", tuple), ("L", list)):
        if tag in obj:
            if not isinstance(obj[tag], list):
                raise ProtocolError("malformed sequence")
            return kind(decode_value(v, tensors, depth + 1) for v in obj[tag])
    if "D" in obj and isinstance(obj["D"], list):
        out = {}
        for item in obj["D"]:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
                raise ProtocolError("malformed dict")
            out[item[0]] = decode_value(item[1], tensors, depth + 1)
        return out
    raise ProtocolError("malformed value")
