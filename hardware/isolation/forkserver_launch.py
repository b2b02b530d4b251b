"""Starting a fork server process (hardware.isolation.forkserver) without waiting for it.

Light on purpose (no torch): the judge's entry (hardware.judge.process) starts its fork server first,
so that both processes import torch and Triton at the same time, then imports the judge. The fork
server answers "ready" on the returned socket once its imports are done; hardware.isolation.candidate_process's
`ForkServer` reads that and configures it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from kernelwright import IMPORT_ROOT
from kernelwright.hardware.isolation.env import minimal_env

LOG_NAME = "forkserver.log"
"""The fork server's output, in the judge's temporary folder."""


def launch_fork_server(
    device: str, gpu: str | None, tmpdir: str
) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Start `python -m kernelwright.hardware.isolation.forkserver` for this process: (process, this side's socket)."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    env = minimal_env(device, home=tmpdir, gpu=gpu)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (IMPORT_ROOT, os.environ.get("PYTHONPATH", "")) if p)
    log = open(os.path.join(tmpdir, LOG_NAME), "ab")  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kernelwright.hardware.isolation.forkserver", str(theirs.fileno()), device, str(os.getpid())],
            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            pass_fds=(theirs.fileno(),), cwd=tmpdir,
        )  # fmt: skip
    except BaseException:
        mine.close()
        raise
    finally:
        theirs.close()
        log.close()
    return proc, mine
