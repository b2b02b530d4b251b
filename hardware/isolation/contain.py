"""The chain of processes every candidate process is started through, and the contained run of one function.

Three processes, the same for the judge's candidates (hardware.isolation.forkserver) and the compile
feedback's phases (`run_contained`, for hardware.compile.child):
- a keeper (the fork server's child, or the caller of `run_contained` itself): it enters new PID,
  network and mount namespaces where the OS allows (hardware.isolation.confine.enter_namespaces), forks
  the init (`fork_init`) and waits for it (`wait_init`), then kills whatever was left behind where there
  is no PID namespace to do it and returns the candidate's status (128 + signal when a signal ended it);
- an init: the first process of the new PID namespace (when there is one: every process in it dies
  with it), which mounts the namespace's own /proc and /dev, forks the candidate process and reaps
  orphans until it ends. A PID namespace's first process ignores signals it has no handler for (abort()
  would end in SIGSEGV), so the candidate runs as its child, with ordinary signals;
- the candidate process, which confines itself and runs candidate code.
Each dies with its parent (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Sequence

from kernelwright.hardware.isolation.confine import (
    CANDIDATE_UID_BASE,
    Confinement,
    become_subreaper,
    candidate_paths,
    confine_candidate,
    confine_level,
    die_with_parent,
    enter_namespaces,
    private_mounts,
    uid_probe,
)
from kernelwright.hardware.isolation.processes import kill_descendants


def _status_code(status: int, cap: int | None = None) -> int:
    """A wait status as an exit code: 128 + signal when a signal ended the process."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else (min(code, cap) if cap is not None else code)


def fork_init(
    namespaces: list[str],
    problem: str | None,
    candidate: Callable[[str | None], int],
    *,
    in_init: Callable[[], None] | None = None,
    close_in_init: Sequence[int] = (),
) -> int:
    """Fork the init (see the module docstring); its pid. In it: `in_init` first (joining a cgroup, say),
    the namespace's private /proc and /dev where "mount" is among `namespaces`, then the candidate process,
    which runs `candidate(problem)` (`problem`: what confinement could not do, mounts included) and exits
    with what it returns; `close_in_init`: descriptors the init closes once the candidate has them. The
    init exits with the candidate's status."""
    init = os.fork()
    if init:
        return init
    code = 70
    try:
        die_with_parent()
        if in_init is not None:
            in_init()
        if "mount" in namespaces:
            mounts = private_mounts()
            if mounts:
                problem = f"{problem}; {mounts}" if problem else mounts
        child = os.fork()
        if child == 0:
            _run_candidate(candidate, problem)
        for fd in close_in_init:
            os.close(fd)
        while True:  # reap orphans until the candidate is done
            pid, status = os.waitpid(-1, 0)
            if pid == child:
                code = _status_code(status, cap=127)
                break
    except BaseException:  # noqa: B036 - the init must exit, whatever happened
        traceback.print_exc()
    os._exit(code)


def _run_candidate(candidate: Callable[[str | None], int], problem: str | None) -> None:
    """The candidate process's life; never returns."""
    code = 71
    try:
        die_with_parent()
        code = candidate(problem)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: B036 - the candidate process must exit, whatever happened
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def wait_init(init: int, namespaces: list[str]) -> int:
    """In the keeper: wait for the init, kill what was left behind where no PID namespace did, and return
    the candidate's status (the init's exit code carries it; 128 + signal when a signal ended the init)."""
    _, status = os.waitpid(init, 0)
    if "pid" not in namespaces:
        kill_descendants()
    return _status_code(status)


def run_contained(private_dir: str, fn: Callable[[], int]) -> int:
    """Run `fn` in a candidate process of its own, confined as the judge's are (KERNELWRIGHT_CONFINE):
    namespaces with an init as the PID namespace's first process, a private /proc and /dev, Landlock,
    no capabilities and uid CANDIDATE_UID_BASE where the host allows, a memory cgroup at the candidates'
    ceiling (hardware.isolation.memory_cap) where one can be made; its exit code (128 + signal when a
    signal ended it). This process, the keeper, must be single-threaded; it enters the mount and network
    namespaces itself and runs no candidate code. The caller's environment is the candidate's: keep it
    minimal."""
    from kernelwright.hardware.isolation import memory_cap  # (it imports confine, which this imports)

    level = confine_level()
    uid = None if level == "none" or uid_probe(candidate_paths(private_dir)) else CANDIDATE_UID_BASE
    cgroups, _ = memory_cap.find_parent()  # its memory capped at the judge's ceiling, memfds included
    namespaces, problem = enter_namespaces() if level == "full" else ([], None)
    become_subreaper()  # without a PID namespace, what the candidate leaves behind is found and killed here

    def candidate(problem: str | None) -> int:
        c = Confinement(notes=[problem] if problem else [])
        confine_candidate(
            c, private_dir=private_dir, namespaces=namespaces, use_landlock=level != "none", uid=uid
        )
        return fn()

    def join_cgroup() -> None:
        if cgroups is not None:
            memory_cap.join(cgroups, "phase")

    code = wait_init(fork_init(namespaces, problem, candidate, in_init=join_cgroup), namespaces)
    if cgroups is not None:
        if memory_cap.oom_kills(os.path.join(cgroups["path"], "phase"), cgroups["version"]):
            print(
                f"killed by its memory cgroup: it took more than {memory_cap.ceiling() >> 20} MiB",
                file=sys.stderr,
            )
        memory_cap.remove_tree(cgroups["path"])
    return code
