"""Confining a candidate process: what the OS allows here, applied before candidate code is imported.

Every step is best effort and reports what it did; `Confinement` records the outcome and travels
with every EvalResult (`extra["confinement"]`), so a user can see what held on their machine. Whatever
imports candidate code is a candidate process: the judge's (hardware.isolation.forkserver) and the offline compile
feedback's phases (hardware.compile.child, through hardware.isolation.contain.run_contained) get the same steps.

- environment (hardware.isolation.env.minimal_env): a minimal, fixed set of variables (no `*_KEY`,
  tokens, proxy settings; nothing of the caller's environment but a few toolchain settings), a private
  HOME, TMPDIR, working directory and Triton cache, removed after the candidate;
- namespaces (`unshare`, as root or through a user namespace): a PID namespace whose first process is
  the candidate, so every process it starts dies with it and it sees no other process; a network
  namespace with no interfaces up; a mount namespace with its own /proc and its own /dev (`private_dev`:
  a read-only tmpfs holding only null, zero, full, random, urandom and the nodes of the one GPU its judge
  uses (hardware.isolation.dev_nodes), and a private
  /dev/shm that dies with the candidate);
- Landlock (Linux 5.13+, no privileges needed): writes only beneath the private directory, to those
  device nodes (no node made or removed in /dev) and the process's own /proc entries; no TCP bind or
  connect (ABI 4+), no signals to processes outside the sandbox and no abstract Unix sockets outside it
  (ABI 6+);
- read-only mounts, where a mount namespace exists but Landlock does not;
- privileges (`drop_privileges`): no capabilities (bounding set, ambient set and the process's own),
  no new privileges, and a non-root uid of its own where the host lets that uid read what the candidate
  needs (`uid_probe`);
- resource limits: address space on CPU (a multiple of the task's footprint plus a base), file size,
  open files, no core dumps; death with the parent (PR_SET_PDEATHSIG). What memory the candidate really
  takes (memfds and /dev/shm included) is capped by a memory cgroup where one can be made
  (hardware.isolation.memory_cap).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import resource
import shutil
import signal
import struct
import sys
import sysconfig
from pathlib import Path

from pydantic import BaseModel, Field

from kernelwright.hardware.isolation.dev_nodes import BASICS as DEV_BASICS
from kernelwright.hardware.isolation.dev_nodes import device_nodes

# prctl options
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
# securebits: root gains no capabilities by exec, none may be raised into the ambient set, all locked
_SECUREBITS = (1 << 0) | (1 << 1) | (1 << 5) | (1 << 6) | (1 << 7)
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
    devices: str = "the host's /dev"
    """"own /dev: ..." where a mount namespace let it have one, else what Landlock left writable there."""
    privileges: str = "not dropped"
    """Capabilities and uid: "no capabilities, uid N" when both were dropped, else what was kept and why."""
    memory: str = "address space only (RLIMIT_AS)"
    """Which cap holds what the candidate really takes: a memory cgroup, or the limits that stand in."""
    memory_limit_bytes: int | None = None
    """On CPU: the cap set at load (the cgroup's where one holds, else the address-space limit)."""
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


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> int:
    def b(s: str | None) -> bytes | None:
        return s.encode() if s is not None else None

    if _libc.mount(b(source), b(target), b(fstype), ctypes.c_ulong(flags), b(data)) != 0:
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


# -------------------------------------------------------------------------------------------- /dev
SHM_BYTES = 256 << 20
"""The private /dev/shm's size: nothing of the judge's goes through it; a memory cgroup counts it too."""


def private_mounts() -> str | None:
    """In a new mount and PID namespace: `private_proc`, then `private_dev` whether or not /proc could be
    mounted (a masked /proc must not leave the candidate the host's /dev and /dev/shm); neither where
    mounts could not be made private, since a mount would then reach the host. The problems, or None."""
    problem = private_proc()
    if problem == "could not make mounts private":
        return f"{problem}: /proc and /dev are the host's"
    return "; ".join(p for p in (problem, private_dev()) if p) or None


def private_dev() -> str | None:
    """In a new mount namespace (after `private_proc`): replace /dev with a read-only tmpfs holding only
    `device_nodes()` (bound from the host's), the usual /dev/fd links and a private /dev/shm; the problem,
    or None. The host's /dev, its kernel log and its /dev/shm are out of reach from then on."""
    nodes = device_nodes()
    held = {}
    try:
        for path in nodes:  # held open: once the tmpfs covers /dev they are reached through /proc/self/fd
            held[path] = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        err = _mount("tmpfs", "/dev", "tmpfs", MS_NOSUID, "mode=755,size=1m")
        if err:
            return f"could not mount a tmpfs on /dev ({os.strerror(err)})"
        missing = []
        for path, fd in held.items():
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            if _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC):
                missing.append(path)
        for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                             ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
            os.symlink(target, f"/dev/{name}")
        os.mkdir("/dev/shm")
        shm = _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={SHM_BYTES}")
        ro = _mount(None, "/dev", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
    except OSError as exc:
        return f"could not make a private /dev: {exc}"
    finally:
        for fd in held.values():
            os.close(fd)
    problems = [f"could not bind {', '.join(missing)}"] if missing else []
    problems += [f"no private /dev/shm ({os.strerror(shm)})"] if shm else []
    problems += [f"/dev stayed writable ({os.strerror(ro)})"] if ro else []
    return "; ".join(problems) or None


def dev_is_private() -> bool:
    """True where /dev is the tmpfs `private_dev` mounted (this process's mount namespace)."""
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            sep = fields.index("-")
            if fields[4] == "/dev" and fields[sep + 1] == "tmpfs" and "ro" in fields[5].split(","):
                return True
    except (OSError, ValueError):
        pass
    return False


# -------------------------------------------------------------------------------------- privileges
CANDIDATE_UID_BASE = 2_000_000_000
"""Candidates run as uids of their own from here up (no user owns them): the judge's as BASE + 1 + its
keeper's pid, the compile feedback's phases as BASE. Files they leave are removed with their directory."""


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _capabilities() -> dict[str, int]:
    """This process's capability sets as /proc/self/status shows them (CapEff, CapPrm, CapBnd, ...)."""
    caps = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Cap"):
                key, value = line.split(":")
                caps[key] = int(value, 16)
    return caps


def uid_probe(paths: list[tuple[str, int]], uid: int = CANDIDATE_UID_BASE) -> str | None:
    """Whether `uid` could run a candidate here: None when it has the access asked for (os.R_OK, W_OK,
    X_OK) to every one of `paths` that exists (for this process), else why not. Only root can change uid; run in a fork,
    so this process keeps its own."""
    if os.geteuid() != 0:
        return "not root: the candidate keeps this user's uid"
    paths = [(p, mode) for p, mode in paths if os.path.exists(p)]  # as root: the uid may not even see them
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        problem = "the probe failed"
        try:
            os.close(rfd)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            problem = next((f"uid {uid} cannot use {p}" for p, mode in paths if not os.access(p, mode)), "")
        except BaseException as exc:  # noqa: B036 - the probe must exit, whatever happened
            problem = f"could not change uid ({exc})"
        os.write(wfd, problem.encode()[:2000])
        os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as f:
        problem = f.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return problem or None


def candidate_paths(private_dir: str) -> list[tuple[str, int]]:
    """What a candidate process reads or runs, with the access it needs: Python and its libraries, the
    packages already imported (torch, triton, this one), every directory on sys.path, the way to its
    private directory, the GPU's nodes."""
    read = [os.path.realpath(sys.executable), os.path.dirname(os.__file__), sys.prefix]
    for name in ("torch", "triton", "numpy", "kernelwright"):
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "__file__", None):
            read.append(os.path.dirname(os.path.realpath(str(mod.__file__))))
    read += [p for p in sys.path if p and os.path.isdir(p)]
    # On a GPU, Triton builds its launcher with the C compiler against Python's headers.
    read += [sysconfig.get_paths().get("include") or ""]
    read += [os.path.realpath(c) for c in map(shutil.which, ("cc", "gcc")) if c]
    paths = [(p, os.R_OK | (os.X_OK if os.path.isdir(p) else 0)) for p in read if p]
    parts = Path(os.path.realpath(private_dir)).parts
    paths += [(str(Path(*parts[:i])), os.X_OK) for i in range(2, len(parts))]
    gpu = [p for p in device_nodes() if p.removeprefix("/dev/") not in DEV_BASICS]
    return paths + [(p, os.R_OK | os.W_OK) for p in gpu if not os.path.isdir(p)]


def drop_privileges(uid: int | None) -> tuple[str, list[str]]:
    """No capabilities left in any set, securebits locked so none comes back (exec as root included),
    and, with `uid`, that uid and gid and no supplementary groups; (what holds, problems)."""
    problems = []
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 63
    if not all(_prctl(PR_CAPBSET_DROP, cap) for cap in range(last + 1)):
        problems.append("the bounding set could not be emptied (no CAP_SETPCAP)")
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    _prctl(PR_SET_SECUREBITS, _SECUREBITS)  # fails without CAP_SETPCAP: the bounding set is the guard then
    if uid is not None:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        except OSError as exc:
            problems.append(f"could not become uid {uid}: {exc}")
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words per set
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        problems.append(f"capset failed ({os.strerror(ctypes.get_errno())})")
    # A change of uid clears the death signal and makes the process undumpable, which hands its /proc
    # entries to root: set both back (its uid is its own, so being dumpable shows it to nobody else).
    die_with_parent()
    _prctl(PR_SET_DUMPABLE, 1)
    no_new_privileges()
    caps = _capabilities()
    left = {
        k: hex(v) for k, v in caps.items() if k in ("CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd") and v
    }
    if left:
        problems.append(f"capabilities left: {left}")
    who = f"uid {os.getuid()}" + (" (root)" if os.getuid() == 0 else "")
    return ("no capabilities" if not left else "capabilities kept") + f", {who}", problems


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


def landlock(writable: list[str], devices: list[str] | None = None) -> tuple[int, str | None]:
    """Restrict this process (and its future children) with Landlock; (ABI used, problem or None).

    Writes are allowed only beneath `writable`, and to the files beneath `devices` (written, never made
    or removed); all reads stay allowed (libraries, the task's own files). With ABI 4+ no TCP
    bind/connect; with ABI 6+ no signals or abstract Unix sockets outside.
    """
    abi = landlock_abi()
    if abi <= 0:
        return 0, "Landlock is not available on this kernel"
    write_access = _FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE
    file_access = _FS_WRITE_FILE
    if abi >= 2:
        write_access |= _FS_REFER
    if abi >= 3:
        write_access |= _FS_TRUNCATE
        file_access |= _FS_TRUNCATE
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("QQQ", write_access, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    buf = ctypes.create_string_buffer(attr[:size], size)
    ruleset = _libc.syscall(_SYS_CREATE_RULESET, buf, ctypes.c_size_t(size), 0)
    if ruleset < 0:
        return 0, f"landlock_create_ruleset failed ({os.strerror(ctypes.get_errno())})"
    rules = [(p, write_access) for p in writable] + [(p, file_access) for p in devices or []]
    try:
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = ctypes.create_string_buffer(struct.pack("=Qi", access, fd), 12)
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


def limit_resources(memory_bytes: int | None, file_bytes: int = 4 << 30) -> list[str]:
    """Resource limits for a candidate process; the notes say what could not be set. `file_bytes` bounds
    every file it writes, memfds and /dev/shm files included (no file over 4 GiB by default, even in
    the private directory)."""
    notes = []
    limits = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_FSIZE, file_bytes),
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
    c: Confinement,
    *,
    private_dir: str,
    namespaces: list[str],
    use_landlock: bool = True,
    uid: int | None = None,
) -> Confinement:
    """The steps taken inside the candidate process itself, before the candidate is imported.

    `namespaces` are those its parent entered for it (this process is the first of the new PID
    namespace when "pid" is among them; with "mount", /dev is `private_dev`'s). `uid`: the uid to
    become, None to keep this one (`uid_probe` says whether one would work).
    """
    c.namespaces = list(namespaces)
    own_dev = "mount" in namespaces and dev_is_private()
    # The device nodes it may write, and this process's own /proc entries: the CUDA driver names its
    # threads through /proc/self/task/*/comm and fails to start without that (resolved now, to this
    # process). A private /dev/shm is its own; the host's stays out of reach.
    writable = [private_dir, "/proc/self"] + (["/dev/shm"] if own_dev else [])
    if uid is not None:
        try:
            os.chown(private_dir, uid, uid)
        except OSError as exc:
            c.notes.append(f"could not hand the private directory to uid {uid}: {exc}")
            uid = None
    abi, problem = (
        landlock(writable, device_nodes())
        if use_landlock
        else (0, "Landlock switched off (KERNELWRIGHT_CONFINE)")
    )
    c.landlock_abi = abi
    if abi:
        c.filesystem = (
            "landlock: writes only in the private directory, device files and its own /proc entries"
        )
    elif "mount" in namespaces:
        ro_problem = read_only_mounts([private_dir] + (["/dev/shm"] if own_dev else []))
        c.filesystem = "read-only mounts except the private directory" + (
            f" ({ro_problem})" if ro_problem else ""
        )
    if problem:
        c.notes.append(problem)
    if own_dev:
        c.devices = "own /dev, read-only: null, zero, full, random, urandom, its GPU's nodes; own /dev/shm"
    elif abi:
        c.devices = "the host's /dev: landlock lets it write only null, zero, full, random, urandom, its GPU"
    if "net" in namespaces:
        c.network = "own network namespace (no interfaces up)"
    elif abi >= 4:
        c.network = "landlock: no TCP bind or connect (UDP not confined)"
    if abi >= 6:
        c.signals = "landlock: no signals to processes outside the sandbox"
    elif "pid" in namespaces:
        c.signals = "own PID namespace: no other process is visible"
    c.privileges, problems = drop_privileges(uid)
    c.notes.extend(problems)
    c.notes.extend(limit_resources(None))
    return c


def errno_name(code: int) -> str:
    return errno.errorcode.get(code, str(code))
