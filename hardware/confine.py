"""Confining a candidate process: what the OS allows here, applied before candidate code is imported.

Every step is best effort and reports what it did; `Confinement` records the outcome and travels
with every EvalResult (`extra["confinement"]`), so a user can see what held on their machine.

- environment: a minimal, fixed set of variables (no `*_KEY`, tokens, proxy settings; nothing of the
  caller's environment but a few toolchain settings), a private HOME, TMPDIR, working directory and
  Triton cache, removed after the candidate;
- namespaces (`unshare`, as root or through a user namespace): a PID namespace whose first process is
  the candidate, so every process it starts dies with it and it sees no other process; a network
  namespace with no interfaces up; a mount namespace with its own /proc;
- Landlock (Linux 5.13+, no privileges needed): writes only beneath the private directory (and device
  files and the process's own /proc entries), no TCP bind or connect (ABI 4+), no signals to processes outside the sandbox and no abstract
  Unix sockets outside it (ABI 6+);
- read-only mounts, where a mount namespace exists but Landlock does not;
- resource limits: address space on CPU (a multiple of the task's footprint plus a base), file size,
  open files, no core dumps; no new privileges; death with the parent (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import resource
import signal
import struct
import sys
from pathlib import Path

from pydantic import BaseModel, Field

# prctl options
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
# unshare flags
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
# mount flags
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

_KEPT_ENV_PREFIXES = ("TRITON_", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "OMP_NUM_THREADS",
                      # the profiler's CUPTI settings (the GPU cross-check runs a profiler session in the
                      # candidate process; benchmarks/judge_host_bias.py compares TEARDOWN_CUPTI=1)
                      "TEARDOWN_CUPTI", "DISABLE_CUPTI_LAZY_REINIT")  # fmt: skip
_DROPPED_TRITON = ("TRITON_CACHE_DIR", "TRITON_DUMP_DIR", "TRITON_OVERRIDE_DIR", "TRITON_HOME")

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


class Confinement(BaseModel):
    """What was applied to a candidate process (and what could not be, with the reason)."""

    environment: str = "minimal"
    namespaces: list[str] = Field(default_factory=list)
    """Entered namespaces: pid, net, mount (user where entered without root)."""
    landlock_abi: int = 0
    """0: Landlock not available; else the ABI version used."""
    filesystem: str = "not confined"
    """"landlock: writes only in the private directory", "read-only mounts", or "not confined"."""
    network: str = "not confined"
    signals: str = "not confined"
    memory_limit_bytes: int | None = None
    notes: list[str] = Field(default_factory=list)


def _prctl(option: int, arg: int = 0) -> bool:
    return _libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) == 0


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """PR_SET_PDEATHSIG: the kernel sends `sig` when the thread that forked this process exits."""
    return _prctl(PR_SET_PDEATHSIG, sig)


def become_subreaper() -> bool:
    """Orphaned descendants are re-parented to this process instead of init, so it can kill them."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def no_new_privileges() -> bool:
    return _prctl(PR_SET_NO_NEW_PRIVS, 1)


def not_dumpable() -> bool:
    """Other processes of the same user can no longer read this one's memory or environment."""
    return _prctl(PR_SET_DUMPABLE, 0)


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


def enter_namespaces() -> tuple[list[str], str | None]:
    """unshare PID, network and mount namespaces for this process's next children.

    As root directly; otherwise inside a new user namespace that maps this user to root. Returns the
    namespaces entered and, when none could be, why.
    """
    uid, gid = os.getuid(), os.getgid()
    attempts = [(CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS, False)]
    if uid != 0:
        attempts.insert(0, (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS, True))
    attempts.append((CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS, True))
    reason = None
    for flags, user in attempts:
        if _libc.unshare(flags) == 0:
            if user:
                try:
                    Path("/proc/self/setgroups").write_text("deny")
                    Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
                    Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
                except OSError as exc:
                    return ["user", "pid", "net", "mount"], f"user namespace map failed: {exc}"
            names = ["pid", "net", "mount"]
            return (["user", *names] if user else names), None
        reason = os.strerror(ctypes.get_errno())
    return [], f"unshare refused ({reason})"


def _mount(source: str | None, target: str, fstype: str | None, flags: int) -> int:
    def b(s: str | None) -> bytes | None:
        return s.encode() if s is not None else None

    if _libc.mount(b(source), b(target), b(fstype), ctypes.c_ulong(flags), None) != 0:
        return ctypes.get_errno()
    return 0


def private_proc() -> str | None:
    """In a new mount and PID namespace: make mounts private and mount a /proc of this namespace."""
    if _mount(None, "/", None, MS_REC | MS_PRIVATE):
        return "could not make mounts private"
    err = _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    return f"could not mount /proc ({os.strerror(err)})" if err else None


def read_only_mounts(writable: list[str]) -> str | None:
    """Remount every mount read-only except `writable` paths (bound onto themselves first) and /dev."""
    for path in writable:
        if _mount(path, path, None, MS_BIND | MS_REC):
            return f"could not bind {path}"
    keep = {os.path.realpath(p) for p in writable} | {"/dev", "/proc", "/sys"}
    try:
        points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    except OSError as exc:
        return f"could not read mountinfo: {exc}"
    failed = 0
    for mp in points:
        mp = mp.encode().decode("unicode_escape")
        if any(mp == k or mp.startswith(k + "/") for k in keep):
            continue
        if _mount(None, mp, None, MS_REMOUNT | MS_BIND | MS_RDONLY):
            failed += 1
    return f"{failed} mounts stayed writable" if failed else None


# ----------------------------------------------------------------------------------------- Landlock
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_FS_WRITE_FILE = 1 << 1
_FS_REMOVE_DIR, _FS_REMOVE_FILE = 1 << 4, 1 << 5
_FS_MAKE = sum(1 << i for i in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2  # ABI 4
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1, 2  # ABI 6


def landlock_abi() -> int:
    abi = _libc.syscall(_SYS_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
    return max(0, abi)


def landlock(writable: list[str]) -> tuple[int, str | None]:
    """Restrict this process (and its future children) with Landlock; (ABI used, problem or None).

    Writes are allowed only beneath `writable`; all reads stay allowed (libraries, the task's own
    files). With ABI 4+ no TCP bind/connect; with ABI 6+ no signals or abstract Unix sockets outside.
    """
    abi = landlock_abi()
    if abi <= 0:
        return 0, "Landlock is not available on this kernel"
    write_access = _FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE
    if abi >= 2:
        write_access |= _FS_REFER
    if abi >= 3:
        write_access |= _FS_TRUNCATE
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("QQQ", write_access, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    buf = ctypes.create_string_buffer(attr[:size], size)
    ruleset = _libc.syscall(_SYS_CREATE_RULESET, buf, ctypes.c_size_t(size), 0)
    if ruleset < 0:
        return 0, f"landlock_create_ruleset failed ({os.strerror(ctypes.get_errno())})"
    try:
        for path in writable:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = ctypes.create_string_buffer(struct.pack("=Qi", write_access, fd), 12)
                if _libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0) != 0:
                    return 0, f"landlock_add_rule({path}) failed ({os.strerror(ctypes.get_errno())})"
            finally:
                os.close(fd)
        if not no_new_privileges():
            return 0, "PR_SET_NO_NEW_PRIVS failed"
        if _libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            return 0, f"landlock_restrict_self failed ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    return abi, None


def limit_resources(memory_bytes: int | None) -> list[str]:
    """Resource limits for a candidate process; the notes say what could not be set."""
    notes = []
    limits = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_FSIZE, 4 << 30),  # no file over 4 GiB, even in the private directory
        (resource.RLIMIT_NOFILE, 4096),
    ]
    if memory_bytes is not None:
        limits.append((resource.RLIMIT_AS, memory_bytes))
    for which, value in limits:
        try:
            soft, hard = resource.getrlimit(which)
            new = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (new, new))
        except (ValueError, OSError) as exc:
            notes.append(f"rlimit {which}: {exc}")
    return notes


CONFINE_LEVELS = ("full", "no-namespaces", "none")
"""KERNELWRIGHT_CONFINE: "full" (default: namespaces and Landlock where the OS allows), "no-namespaces"
(Landlock and limits only, for hosts where namespaces get in the way), "none" (environment, private
directory and limits only; for debugging a harness problem, never for untrusted candidates)."""


def confine_level() -> str:
    """The confinement level asked for in KERNELWRIGHT_CONFINE; ValueError for an unknown one."""
    level = os.environ.get("KERNELWRIGHT_CONFINE", "full").strip() or "full"
    if level not in CONFINE_LEVELS:
        raise ValueError(f"KERNELWRIGHT_CONFINE must be one of {', '.join(CONFINE_LEVELS)}, not {level!r}")
    return level


def confine_candidate(
    c: Confinement, *, private_dir: str, namespaces: list[str], use_landlock: bool = True
) -> Confinement:
    """The steps taken inside the candidate process itself, before the candidate is imported.

    `namespaces` are those its parent entered for it (this process is the first of the new PID
    namespace when "pid" is among them).
    """
    c.namespaces = list(namespaces)
    # Device files for the GPU, and this process's own /proc entries: the CUDA driver names its threads
    # through /proc/self/task/*/comm and fails to start without that (resolved now, to this process).
    writable = [private_dir, "/dev", "/proc/self"]
    abi, problem = landlock(writable) if use_landlock else (0, "Landlock switched off (KERNELWRIGHT_CONFINE)")
    c.landlock_abi = abi
    if abi:
        c.filesystem = (
            "landlock: writes only in the private directory, device files and its own /proc entries"
        )
    elif "mount" in namespaces:
        ro_problem = read_only_mounts([private_dir])
        c.filesystem = "read-only mounts except the private directory" + (
            f" ({ro_problem})" if ro_problem else ""
        )
    if problem:
        c.notes.append(problem)
    if "net" in namespaces:
        c.network = "own network namespace (no interfaces up)"
    elif abi >= 4:
        c.network = "landlock: no TCP bind or connect (UDP not confined)"
    if abi >= 6:
        c.signals = "landlock: no signals to processes outside the sandbox"
    elif "pid" in namespaces:
        c.signals = "own PID namespace: no other process is visible"
    no_new_privileges()
    c.notes.extend(limit_resources(None))
    return c


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


def errno_name(code: int) -> str:
    return errno.errorcode.get(code, str(code))
