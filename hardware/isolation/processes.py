"""Process bookkeeping for the harness: this process's virtual memory size, and killing every descendant
of a process (a candidate process and whatever it started) until none is left. Used by the fork server
(hardware.isolation.forkserver), the contained runs (hardware.isolation.contain.run_contained) and the memory cap
(hardware.isolation.memory_cap)."""

from __future__ import annotations

import os
import signal


def vm_bytes() -> int:
    """This process's virtual memory size (VmSize), 0 when unknown."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def kill_descendants(pid: int | None = None, spare: set[int] | None = None) -> int:
    """SIGKILL every descendant of `pid` (default: this process), except the subtrees of `spare`, until
    none is left; how many died.

    Descendants are found from /proc (parent links), repeatedly, so processes forked while the first
    ones die are caught too. With this process a subreaper, orphans re-parent here and stay found.
    """
    root = os.getpid() if pid is None else pid
    killed = 0
    for _ in range(50):
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat[stat.rfind(b")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(entry))
        found, stack = [], [root]
        while stack:
            for child in children.get(stack.pop(), []):
                if spare and child in spare:
                    continue  # this subtree stays (a candidate process forked ahead of need)
                found.append(child)
                stack.append(child)
        if not found:
            break
        for p in found:
            try:
                os.kill(p, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        if root == os.getpid():
            while True:  # reap what died, so it leaves the process table
                try:
                    if os.waitpid(-1, os.WNOHANG)[0] == 0:
                        break
                except ChildProcessError:
                    break
    return killed
