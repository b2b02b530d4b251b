"""What a candidate process really takes in memory, capped: a memory cgroup per candidate where one can be made.

RLIMIT_AS bounds address space only: memory in a memfd that is no longer mapped, or in a tmpfs file, is
not counted. A memory cgroup counts every page the candidate's processes take (anonymous memory, memfds,
/dev/shm, page cache) and the kernel kills the candidate when it goes over.

The fork server finds a parent it may make cgroups in (`find_parent`: its own memory cgroup, v1 or v2,
where it can create a child with a memory limit). For each candidate the keeper (still privileged, outside
the candidate's namespaces) creates one, joins it before it forks, sets a ceiling (half the host's memory)
and answers the candidate's one request at load (`cap_memory`, sent before the candidate is imported) by
lowering it to what the candidate uses then plus the task's budget. The candidate cannot raise it: the
cgroup's files are not its to write (Landlock, read-only mounts, another uid), and the channel is closed
before the candidate is imported; the keeper answers one request only. The fork server removes the
cgroup when the keeper is gone and says whether the cap killed the candidate. A fork server killed with
its judge leaves its empty parent behind: the next one made in the same cgroup removes it.

On cgroup v2 a process may make cgroups only in a subtree delegated to it (`delegation`): systemd's
Delegate=yes (the cgroup marked `user.delegate` or `trusted.delegate`, its files chowned to the service's
user), a cgroup of its own (its directory, cgroup.procs and cgroup.subtree_control owned by this uid and
writable), or root's. And v2 lets no process live in a cgroup whose children get the memory controller:
where the delegated cgroup holds processes (this one, its parents in the same service), they are moved
into a leaf beside the candidates' parent first (`LEAF`), which a later search recognises as its own.

Where no cgroup can be made the result says so and why, in one line; RLIMIT_AS, a per-file size limit
(RLIMIT_FSIZE: every memfd and /dev/shm file) and the private /dev/shm's size stand in.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import sys
import time
from pathlib import Path

from kernelwright.hardware.isolation.confine import Confinement, limit_resources
from kernelwright.hardware.isolation.processes import vm_bytes

_PREFIX = "kernelwright-"
LEAF = "kernelwright-leaf"
"""On cgroup v2, where the processes of the delegated cgroup go so that its children may have the memory
controller (v2 allows no process in a cgroup whose children have controllers)."""


def _mounts() -> dict[str, tuple[str, str]]:
    """{"v1": (mount point, mount root), "v2": (...)} for the memory hierarchies mounted here."""
    found: dict[str, tuple[str, str]] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        fstype, opts = fields[sep + 1], fields[sep + 3].split(",") if len(fields) > sep + 3 else []
        if fstype == "cgroup" and "memory" in opts:
            found.setdefault("v1", (fields[4], fields[3]))
        elif fstype == "cgroup2":
            found.setdefault("v2", (fields[4], fields[3]))
    return found


def _own_dir(
    version: str, mounts: dict[str, tuple[str, str]], cgroup_file: str = "/proc/self/cgroup"
) -> str | None:
    """This process's cgroup directory in the memory hierarchy of `version` (on v2, the cgroup above
    `LEAF` when this process was moved there: that is the delegated one)."""
    if version not in mounts:
        return None
    point, root = mounts[version]
    for line in Path(cgroup_file).read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (version == "v1" and "memory" in controllers.split(",")) or (
            version == "v2" and controllers == ""
        ):
            rel = path[len(root) :] if root != "/" and path.startswith(root) else path
            own = os.path.join(point, rel.lstrip("/"))
            return os.path.dirname(own) if version == "v2" and os.path.basename(own) == LEAF else own
    return None


def delegation(base: str, euid: int | None = None) -> str | None:
    """None when a process of uid `euid` (this one's by default) may make memory cgroups under the cgroup v2
    directory `base`, else why not, in one line (see the module docstring)."""
    euid = os.geteuid() if euid is None else euid
    try:
        controllers = Path(base, "cgroup.controllers").read_text().split()
    except OSError as exc:
        return f"v2: cannot read {base}/cgroup.controllers ({exc.strerror or exc})"
    if "memory" not in controllers:
        return f"v2: the memory controller is not delegated to {base} (cgroup.controllers: {' '.join(controllers) or 'none'})"
    for name in ("trusted.delegate", "user.delegate"):  # systemd marks a Delegate=yes cgroup so
        with contextlib.suppress(OSError):
            if os.getxattr(base, name) == b"1":
                return None
    paths = [base] + [os.path.join(base, f) for f in ("cgroup.procs", "cgroup.subtree_control")]
    try:
        stats = [os.stat(p) for p in paths]
    except OSError as exc:
        return f"v2: {exc.filename}: {exc.strerror}"
    if euid == 0 or all(st.st_uid == euid and st.st_mode & 0o200 for st in stats):
        return None
    owner = stats[0].st_uid
    return (
        f"v2: {base} is not delegated to this process (owned by uid {owner}, this is uid {euid}; no "
        "Delegate=yes): run it under systemd-run -p Delegate=yes (--user for a user's manager) or as root"
    )


def make_room(base: str) -> None:
    """Give `base`'s children the memory controller; where v2 refuses because processes live in `base`
    (EBUSY), move them into `base`/LEAF first. OSError when it cannot."""
    control = os.path.join(base, "cgroup.subtree_control")
    if "memory" in Path(control).read_text().split():
        return
    try:
        _write(control, "+memory")
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            raise
        move_to_leaf(base)
        _write(control, "+memory")


def move_to_leaf(base: str) -> list[int]:
    """Move every process of the cgroup `base` into `base`/LEAF (made if need be); the pids moved."""
    leaf = os.path.join(base, LEAF)
    os.makedirs(leaf, exist_ok=True)
    moved = []
    for pid in Path(base, "cgroup.procs").read_text().split():
        try:
            _write(os.path.join(leaf, "cgroup.procs"), pid)
            moved.append(int(pid))
        except ProcessLookupError:  # it ended meanwhile
            continue
    return moved


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _remove_stale(base: str) -> None:
    """Parents left by fork servers that died without cleaning up (their pid is gone)."""
    with contextlib.suppress(OSError):
        for entry in os.listdir(base):
            if entry.startswith(_PREFIX) and entry[len(_PREFIX) :].isdigit():
                if not os.path.exists(f"/proc/{entry[len(_PREFIX) :]}"):
                    remove_tree(os.path.join(base, entry))


def find_parent() -> tuple[dict | None, str]:
    """A cgroup this process's candidates get theirs under: ({"path", "version"}, what it is) or
    (None, why there is none). Made now, empty; `remove_tree` removes it."""
    try:
        mounts = _mounts()
    except (OSError, ValueError) as exc:
        return None, f"no memory cgroup: cannot read mountinfo ({exc})"
    problems = []
    for version in ("v2", "v1"):
        base = _own_dir(version, mounts)
        if base is None:
            continue
        if version == "v2" and (why := delegation(base)) is not None:
            problems.append(why)
            continue
        _remove_stale(base)
        path = os.path.join(base, f"{_PREFIX}{os.getpid()}")
        try:
            if version == "v2":
                make_room(base)
            os.makedirs(path, exist_ok=True)
            if version == "v2":
                _write(os.path.join(path, "cgroup.subtree_control"), "+memory")
            probe = os.path.join(path, "probe")
            os.makedirs(probe, exist_ok=True)
            try:
                _set_limit(probe, version, 1 << 40)
            finally:
                os.rmdir(probe)
        except OSError as exc:
            problems.append(f"{version}: cannot make a memory cgroup under {base} ({exc.strerror or exc})")
            remove_tree(path)
            continue
        return {"path": path, "version": version}, f"memory cgroup {version} under {base}"
    return None, "no memory cgroup: " + ("; ".join(problems) or "no memory hierarchy is mounted")


def _set_limit(path: str, version: str, limit: int) -> None:
    """Lower (or set) the cgroup's memory limit, swap included: the swap limit follows the memory one."""
    if version == "v1":
        _write(os.path.join(path, "memory.limit_in_bytes"), str(limit))
        memsw = os.path.join(path, "memory.memsw.limit_in_bytes")
        if os.path.exists(memsw):
            _write(memsw, str(limit))
    else:
        _write(os.path.join(path, "memory.max"), str(limit))
        swap = os.path.join(path, "memory.swap.max")
        if os.path.exists(swap):
            _write(swap, "0")


def usage(path: str, version: str) -> int:
    name = "memory.usage_in_bytes" if version == "v1" else "memory.current"
    return int(Path(path, name).read_text())


def oom_kills(path: str, version: str) -> int:
    """How many processes the cgroup's limit killed; 0 when unknown."""
    name = "memory.oom_control" if version == "v1" else "memory.events"
    with contextlib.suppress(OSError, ValueError):
        for line in Path(path, name).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    return 0


def ceiling() -> int:
    """The cap every candidate starts under (a GPU candidate keeps it): half the host's memory."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 // 2
    return 8 << 30


def join(parent: dict, name: str) -> tuple[str | None, str]:
    """In the keeper: make the candidate's cgroup, move this process into it (its children follow) and
    set the ceiling; (its path, what holds) or (None, why not)."""
    path = os.path.join(parent["path"], name)
    try:
        os.makedirs(path, exist_ok=True)
        _set_limit(path, parent["version"], ceiling())
        _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.rmdir(path)
        return None, (
            f"address space (RLIMIT_AS) and every file's size (RLIMIT_FSIZE: memfds, /dev/shm) only: "
            f"no memory cgroup ({exc})"
        )
    return path, (
        f"cgroup {parent['version']}: all the memory it takes (memfds and /dev/shm included), "
        f"{ceiling() >> 20} MiB at most, on CPU lowered at load to what it uses plus the task's budget"
    )


def serve_request(sock: socket.socket, path: str, version: str) -> None:
    """In the keeper: answer the candidate's one request {"budget": bytes} with the cap set."""
    try:
        sock.settimeout(5.0)
        line = sock.recv(256)
        if not line:
            return
        budget = int(json.loads(line)["budget"])
        limit = min(ceiling(), usage(path, version) + max(0, budget))
        _set_limit(path, version, limit)
        sock.sendall(json.dumps({"limit": limit}).encode())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        with contextlib.suppress(OSError):
            sock.sendall(json.dumps({"error": str(exc)[:300]}).encode())


def remove_tree(path: str, timeout: float = 2.0) -> bool:
    """rmdir a cgroup and the ones under it once their processes are gone (the kernel frees them
    asynchronously after SIGKILL: retried until `timeout`)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            for sub in sorted((d for d, _, _ in os.walk(path)), key=len, reverse=True):
                os.rmdir(sub)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


# ----------------------------------------------------------------------------- in the candidate process
_channel: socket.socket | None = None


def attach(fd: int) -> None:
    """The candidate process's end of its keeper's cap channel (kept until `cap_memory`)."""
    global _channel
    _channel = socket.socket(fileno=fd)


def cap_memory(c: Confinement, budget: int) -> int:
    """At load, before the candidate is imported: the address-space limit (vm in use + `budget`), every
    file at most `budget`, and the cgroup's cap (memory in use + `budget`) where the keeper holds one;
    the cap that holds what it really takes (the cgroup's, else the address-space limit)."""
    global _channel
    limit = vm_bytes() + budget
    c.notes.extend(limit_resources(limit, file_bytes=min(4 << 30, budget)))
    chan, _channel = _channel, None
    if chan is None:
        return limit
    try:
        chan.settimeout(10.0)
        chan.sendall(json.dumps({"budget": budget}).encode())
        reply = json.loads(chan.recv(256) or b"{}")
    except (OSError, ValueError) as exc:
        reply = {"error": str(exc)}
    finally:
        chan.close()
    if isinstance(reply.get("limit"), int):
        return int(reply["limit"])
    problem = f"the memory cgroup's cap could not be set: {reply.get('error', 'no answer')}"
    c.notes.append(problem)
    print(problem, file=sys.stderr)
    return limit
