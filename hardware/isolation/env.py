"""The environment a candidate process gets (`minimal_env`): a fixed set of variables and a few toolchain
settings of the caller's, never its keys, tokens or proxy settings; a private HOME, TMPDIR and Triton
cache. Every candidate process gets it: the judge's (hardware.isolation.candidate_process, through its fork
server: hardware.isolation.forkserver_launch) and the offline compile feedback's phases (hardware.compile.feedback)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

_KEPT_ENV_PREFIXES = ("TRITON_", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "OMP_NUM_THREADS",
                      # the profiler's CUPTI settings (the GPU cross-check runs a profiler session in the
                      # candidate process; benchmarks/judge_host_bias.py compares TEARDOWN_CUPTI=1)
                      "TEARDOWN_CUPTI", "DISABLE_CUPTI_LAZY_REINIT")  # fmt: skip
_DROPPED_TRITON = ("TRITON_CACHE_DIR", "TRITON_DUMP_DIR", "TRITON_OVERRIDE_DIR", "TRITON_HOME")


def minimal_env(device: str, *, home: str, gpu: str | None = None) -> dict[str, str]:
    """The whole environment a candidate process gets: toolchain settings only, never secrets."""
    env = {
        "PATH": os.pathsep.join(dict.fromkeys([str(Path(sys.executable).parent), "/usr/bin", "/bin"])),
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "TRITON_CACHE_DIR": os.path.join(home, "triton-cache"),
    }
    for key, value in os.environ.items():
        if key.startswith(_KEPT_ENV_PREFIXES) and key not in _DROPPED_TRITON:
            env[key] = value
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
    return env
