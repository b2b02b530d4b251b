"""GPU timing of a candidate against its eager reference, and the torch.compile baseline cache.

Method (after triton.testing.do_bench): CUDA events around each call, an L2 flush (writing a buffer
larger than the L2 cache) before every timed call so no run profits from the previous one's cache,
warm-up runs excluded, the repetition count derived from a first estimate so each function is measured
for about `rep_ms`. Candidate and eager reference are interleaved (A B A B ...) in one loop, so clock
and thermal drift hit both alike; their per-round ratio gives a paired speedup estimate. Reported: the
median, p20/p80 and a 95% bootstrap interval of the median.

Only the worker imports this module's torch-side functions, and only on a GPU: on CPU the harness
reports timing as not meaningful and never produces a number.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

_MIN_FLUSH_BYTES = 256 * 1024 * 1024  # triton.testing.do_bench's flush size; more when L2 is larger
_BOOTSTRAP_RESAMPLES = 1000


class TimingStats(BaseModel):
    """Summary of one function's timed samples, in milliseconds."""

    median_ms: float
    p20_ms: float
    p80_ms: float
    mean_ms: float
    ci_ms: tuple[float, float]
    reps: int


def summarize(samples_ms: Sequence[float], *, seed: int = 0) -> TimingStats:
    """Median, quantiles and a 95% bootstrap interval of the median."""
    x = np.asarray(samples_ms, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no timing samples")
    lo, hi = bootstrap_median_ci(x, seed=seed)
    return TimingStats(
        median_ms=float(np.median(x)),
        p20_ms=float(np.quantile(x, 0.2)),
        p80_ms=float(np.quantile(x, 0.8)),
        mean_ms=float(x.mean()),
        ci_ms=(lo, hi),
        reps=int(x.size),
    )


def bootstrap_median_ci(
    x: Sequence[float] | np.ndarray, *, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of `x`."""
    arr = np.asarray(x, dtype=np.float64)
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(arr, size=(_BOOTSTRAP_RESAMPLES, arr.size), replace=True), axis=1)
    alpha = (1.0 - level) / 2.0
    return float(np.quantile(medians, alpha)), float(np.quantile(medians, 1.0 - alpha))


def paired_speedup(
    base_ms: Sequence[float], cand_ms: Sequence[float], *, seed: int = 0
) -> tuple[float, tuple[float, float]]:
    """Median of the per-round ratios base/candidate and its bootstrap interval (interleaved rounds)."""
    ratios = np.asarray(base_ms, dtype=np.float64) / np.asarray(cand_ms, dtype=np.float64)
    return float(np.median(ratios)), bootstrap_median_ci(ratios, seed=seed)


def bench_interleaved(
    fns: dict[str, Callable[[], Any]],
    *,
    warmup_ms: float = 25.0,
    rep_ms: float = 100.0,
    min_reps: int = 10,
    max_reps: int = 2000,
) -> dict[str, list[float]]:
    """Time several zero-argument GPU closures round-robin; returns the samples (ms) per name."""
    import torch

    device = torch.cuda.current_device()
    flush = torch.empty(flush_bytes(device) // 4, dtype=torch.int32, device="cuda")
    names = list(fns)

    def one_round(record: bool, starts: list[Any], ends: list[Any]) -> None:
        for i, name in enumerate(names):
            flush.zero_()
            if record:
                starts[i].record()
            fns[name]()
            if record:
                ends[i].record()

    # First estimate, which also serves as warm-up: a handful of rounds timed as a whole.
    est_start, est_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    est_start.record()
    for _ in range(5):
        one_round(False, [], [])
    est_end.record()
    torch.cuda.synchronize()
    per_round = max(est_start.elapsed_time(est_end) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / per_round))):
        one_round(False, [], [])
    reps = int(min(max_reps, max(min_reps, rep_ms * len(names) / per_round)))
    starts = [[torch.cuda.Event(enable_timing=True) for _ in names] for _ in range(reps)]
    ends = [[torch.cuda.Event(enable_timing=True) for _ in names] for _ in range(reps)]
    torch.cuda.synchronize()
    for r in range(reps):
        one_round(True, starts[r], ends[r])
    torch.cuda.synchronize()
    return {
        name: [starts[r][i].elapsed_time(ends[r][i]) for r in range(reps)] for i, name in enumerate(names)
    }


def flush_bytes(device: int = 0) -> int:
    """Bytes of the buffer written before each timed call: four times the L2, at least 256 MiB."""
    import torch

    l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
    return max(_MIN_FLUSH_BYTES, 4 * l2)


def baseline_cache_path() -> Path:
    """~/.cache/kernelwright/baselines.json (XDG_CACHE_HOME respected; KERNELWRIGHT_CACHE_DIR wins)."""
    root = os.environ.get("KERNELWRIGHT_CACHE_DIR")
    if root:
        return Path(root) / "baselines.json"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kernelwright" / "baselines.json"


class BaselineCache:
    """torch.compile baseline times on disk, keyed by task hash + shapes + precision, per device and torch.

    Several workers may write at once: every update takes an exclusive lock on a side file, re-reads,
    merges and replaces the file atomically.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or baseline_cache_path()

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, scope: str, key: str) -> dict[str, Any] | None:
        entry = self._read().get(scope, {}).get(key)
        return entry if isinstance(entry, dict) else None

    def put(self, scope: str, key: str, entry: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._read()
            data.setdefault(scope, {})[key] = entry
            tmp = self.path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            os.replace(tmp, self.path)
