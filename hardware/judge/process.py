"""The judge's process: `python -m kernelwright.hardware.judge.process FD DEVICE TMPDIR PARENT_PID`.

Started by `hardware.judge.pool.WorkerPool`. It starts the judge's fork server first (hardware.isolation.forkserver_launch,
no torch here yet), so that the fork server and this process import torch and Triton at the same time
(about 1.5 s each on a CPU), then imports and runs the judge (hardware.judge.server) until its pool stops it
or goes away.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from kernelwright.hardware.isolation.confine import die_with_parent
from kernelwright.hardware.isolation.forkserver_launch import launch_fork_server

if TYPE_CHECKING:
    from kernelwright.hardware.judge.server import Judge


def _watch_parent(parent_pid: int, tmpdir: str) -> None:
    """Exit when the pool is gone (a second line of defence beside PR_SET_PDEATHSIG)."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            shutil.rmtree(tmpdir, ignore_errors=True)
            os._exit(3)


def main(argv: list[str]) -> None:
    fd, device, tmpdir, parent_pid = int(argv[0]), argv[1], argv[2], int(argv[3])
    die_with_parent()
    if os.getppid() != parent_pid:
        os._exit(3)
    # A candidate cannot reach this process (it runs in its own sandbox), but if one signals it anyway
    # the judge keeps going: only SIGKILL (from its pool) ends it.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_IGN)
    conn = Connection(fd)
    faulthandler.enable(file=sys.stderr, all_threads=False)
    threading.Thread(target=_watch_parent, args=(parent_pid, tmpdir), daemon=True).start()
    judge: Judge | None = None
    try:
        try:
            gpu = os.environ.get("CUDA_VISIBLE_DEVICES") if device == "cuda" else None
            launched = launch_fork_server(device, gpu, tmpdir)
            from kernelwright.hardware.isolation.candidate_process import ForkServer
            from kernelwright.hardware.judge.server import Judge

            judge = Judge(conn, device, tmpdir, ForkServer(device, gpu, tmpdir, launched))
        except Exception:
            traceback.print_exc()
            conn.send(("failed", traceback.format_exc()))
            return
        judge.serve()
    except OSError:  # the pool closed its end: it is gone or done with this judge
        pass
    finally:
        if judge is not None:
            judge.forkserver.stop()
        if os.getppid() != parent_pid:
            shutil.rmtree(tmpdir, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
