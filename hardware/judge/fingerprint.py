"""Keyed fingerprints of a tensor's memory: what the judge's evidence recorder (hardware.judge.evidence) and its
reference cache compare to see a write, made with a secret drawn from the OS so no candidate can make a change
that keeps them."""

from __future__ import annotations

import os
from typing import Any

import torch

_FINGERPRINT_CHUNK = 1 << 20
"""Words weighed per chunk: the key's weight vector is this long (8 MiB of int64 per device)."""
_MASK64 = (1 << 64) - 1


def _mix64(x: int) -> int:
    """splitmix64's finaliser: a well-spread 64-bit value from any integer."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _signed(x: int) -> int:
    return x - (1 << 64) if x >> 63 else x


class FingerprintKey:
    """The secret a fingerprint is keyed with, drawn from the OS: a vector of odd 64-bit weights, one per
    position in a chunk, and a salt per chunk, so every position of a storage has a weight of its own that
    nobody without the key can predict. Who fingerprints draws a fresh one per job or per recorded call
    (the Recorder: at every `start`), so nothing a candidate learned before the call tells it the weights."""

    def __init__(self, seed: int | None = None) -> None:
        self._seed = int.from_bytes(os.urandom(8), "little") if seed is None else seed & _MASK64
        self._weights: dict[Any, torch.Tensor] = {}

    def weights(self, device: torch.device) -> torch.Tensor:
        w = self._weights.get(device)
        if w is None:
            gen = torch.Generator().manual_seed(_mix64(self._seed) >> 1)
            w = torch.randint(
                -(1 << 63), (1 << 63) - 1, (_FINGERPRINT_CHUNK,), dtype=torch.int64, generator=gen
            )
            w = (w | 1).to(device)  # odd: a change of one word always changes its weighted sum
            self._weights[device] = w
        return w

    def salt(self, chunk: int) -> int:
        """Chunk `chunk`'s salt, even (xor with it keeps a weight odd)."""
        return _signed(_mix64(self._seed ^ _mix64(chunk + 1)) & ~1 & _MASK64)


def fingerprint(t: torch.Tensor, key: FingerprintKey) -> tuple[int, int]:
    """A keyed, position-weighted sum over the bytes of the tensor's whole storage, modulo 2**64, and its
    size: every 32-bit word times the weight `key` gives its position. Any change of the bytes changes it
    (but with chance 2**-63), moving values between positions included (a swap, +d here and -d there keep
    a plain sum); nobody who does not know the key can make a change it misses. Weighed a chunk at a time,
    so the int64 temporaries stay small whatever the tensor's size."""
    storage = t.untyped_storage()
    n = storage.nbytes()
    if n == 0:
        return (0, 0)
    flat = torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage, 0, (n,), (1,))
    weights = key.weights(flat.device)
    total = 0
    words = flat[: n - n % 4].view(torch.int32)
    for c, i in enumerate(range(0, words.numel(), _FINGERPRINT_CHUNK)):
        part = words[i : i + _FINGERPRINT_CHUNK].to(torch.int64)
        w = weights[: part.numel()] ^ key.salt(c)
        total += int((part * w).sum(dtype=torch.int64))
    if n % 4:  # the last bytes, weighed from the other end of the vector
        tail = flat[n - n % 4 :].to(torch.int64)
        total += int((tail * weights.flip(0)[: tail.numel()]).sum(dtype=torch.int64))
    return (total & _MASK64, n)
