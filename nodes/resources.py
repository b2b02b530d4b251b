"""Long-lived objects the nodes share, kept out of the checkpointed state.

Worker pools (processes), opened memories (Chroma clients) and chat models (HTTP clients) are
expensive and not serializable. Nodes get them here, keyed by their configuration, so every step of a
run (and every run in a long-lived server such as `langgraph dev`) reuses the same ones. `close_all()`
shuts the pools down; it also runs at interpreter exit.
"""

from __future__ import annotations

import atexit
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.language_models.chat_models import BaseChatModel

from kernelwright.providers.chat import OFFLINE_SPECS, load_chat_model

if TYPE_CHECKING:
    from kernelwright.hardware import WorkerPool
    from kernelwright.memory import Memory

_lock = threading.RLock()
_pools: dict[tuple[str, int], WorkerPool] = {}
_memories: dict[str, Memory] = {}
_models: dict[tuple[Any, ...], BaseChatModel] = {}


def worker_pool(device: str, workers: int) -> WorkerPool:
    """The shared evaluation pool for (device, workers), started on first use."""
    from kernelwright.hardware import WorkerPool

    key = (device, int(workers))
    with _lock:
        pool = _pools.get(key)
        if pool is None:
            pool = WorkerPool(device=device, workers=workers)
            _pools[key] = pool
        return pool


def start_worker_pool(context: Any) -> None:
    """Start the pool a run with this context will evaluate on (the compiler node's `worker_pool`), without
    waiting for it: its judges import torch and Triton while the run opens its memory and builds its
    graph (on a CPU about 3 s of a run's start overlap). Best effort: a pool that cannot start is left
    to fail where the run first evaluates, with that step's error."""
    from kernelwright.hardware.targets import resolve_device

    try:
        worker_pool("cuda" if resolve_device(context.device).startswith("cuda") else "cpu", context.workers)
    except Exception:  # noqa: S110 - reported by the compiler node when the run needs the pool
        pass


def open_shared_memory(location: str | Path | None) -> Memory:
    """The shared Memory for a location (None: the default ~/.kernelwright)."""
    from kernelwright.memory import open_memory

    key = (
        str(Path(location).expanduser().resolve())
        if location and "://" not in str(location)
        else str(location)
    )
    with _lock:
        mem = _memories.get(key)
        if mem is None:
            mem = open_memory(location)
            _memories[key] = mem
        return mem


MEMORY_OFF = "off"
"""`--memory off`: the run reads no rules or cases and writes none."""
MEMORY_FRESH = "fresh"
"""`--memory fresh`: an empty store in the run's folder, filled as the run goes."""


def memory_location(memory: str | None, run_dir: str | Path | None) -> str | None:
    """The store a run uses: `memory` as given (None: the default), MEMORY_OFF kept as is, MEMORY_FRESH as
    `<run_dir>/memory`. A folder literally named off or fresh is given as ./off or ./fresh."""
    if memory == MEMORY_FRESH:
        if not run_dir:
            raise ValueError("memory 'fresh' needs a run folder to put the store in")
        return str(Path(run_dir) / "memory")
    return memory


def run_memory(context: Any, run_dir: str | Path | None) -> Memory | None:
    """The shared Memory a run reads and writes, or None when its memory is off."""
    location = memory_location(context.memory, run_dir)
    return None if location == MEMORY_OFF else open_shared_memory(location)


def chat_model(context: Any) -> BaseChatModel:
    """The chat model a Context asks for: its `chat_model` if given, else load_chat_model(model, ...)."""
    given = getattr(context, "chat_model", None)
    if given is not None:
        return given  # type: ignore[no-any-return]
    offline = context.model.strip() in OFFLINE_SPECS
    key = (
        context.model,
        context.base_url,
        context.llm_timeout_s,
        context.seed if offline else None,
    )
    with _lock:
        model = _models.get(key)
        if model is None:
            model = load_chat_model(
                context.model,
                base_url=context.base_url,
                timeout=context.llm_timeout_s,
                # the run retries for a total time itself (providers.invoke_with_retry), honouring
                # Retry-After; the client's own count-based retries would only stretch that unevenly
                max_retries=0,
                **({"seed": context.seed} if offline else {}),
            )
            _models[key] = model
        return model


def forget_chat_models() -> None:
    """Drop cached chat models (the next use loads and probes again)."""
    with _lock:
        _models.clear()


def close_pools() -> None:
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        try:
            pool.close()
        except Exception:  # closing is best effort at exit; a dead pool has nothing left to close
            pass


def close_memories() -> None:
    """Close and drop the cached memories (the pools stay up)."""
    with _lock:
        mems = list(_memories.values())
        _memories.clear()
    for mem in mems:
        close = getattr(mem, "close", None)
        if callable(close):
            close()


def close_all() -> None:
    """Shut down worker pools and drop cached memories and models."""
    close_pools()
    close_memories()
    with _lock:
        _models.clear()


atexit.register(close_pools)
