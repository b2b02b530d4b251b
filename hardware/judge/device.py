"""The judge's device: torch as the judge process imported it, which device it judges on and its name, the
toolchain versions, and what every stage does with the device (the precision switches, synchronising,
the L2-flush buffer for timing). Shared by the judge's parts (hardware.judge.server) across jobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelwright.hardware.result import Versions


@dataclass
class Device:
    """The judge's device and torch (imported in the judge process only)."""

    torch: Any
    kind: str
    """"cuda" or "cpu"."""
    name: str
    versions: Versions
    _flush_buf: Any = field(default=None, repr=False)

    @property
    def cuda(self) -> bool:
        return self.kind == "cuda"

    def apply_precision(self, precision: str) -> None:
        """TF32 for matmul and cuDNN conv only where the precision mode allows it, reference included."""
        tf32 = precision != "strict"
        self.torch.set_float32_matmul_precision("high" if tf32 else "highest")
        self.torch.backends.cudnn.allow_tf32 = tf32

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def empty_cache(self) -> None:
        if self.cuda:
            self.torch.cuda.empty_cache()

    def flush_buffer(self) -> Any:
        """GPU: the buffer zeroed before each timed call of the reference, to flush the L2 cache."""
        if self._flush_buf is None:
            from kernelwright.hardware.timing import flush_bytes

            self._flush_buf = self.torch.empty(flush_bytes(0) // 4, dtype=self.torch.int32, device="cuda")
        return self._flush_buf
