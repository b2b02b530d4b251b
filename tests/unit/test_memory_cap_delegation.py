"""Whether this process may make memory cgroups on cgroup v2 (hardware/isolation/memory_cap.delegation):
only in a subtree delegated to it, checked on fake cgroup trees (plain directories) in tmp_path; and the
leaf its cgroup's processes move to, recognised as its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelwright.hardware.isolation import memory_cap

OTHER_UID = 4242


def fake_cgroup(root: Path, controllers: str = "cpu io memory pids", owner: int | None = None) -> Path:
    """A directory shaped like a cgroup v2 one; chowned to `owner` where this process may (root)."""
    base = root / "user.slice" / "kw.service"
    base.mkdir(parents=True)
    (base / "cgroup.controllers").write_text(controllers + "\n")
    (base / "cgroup.subtree_control").write_text("\n")
    (base / "cgroup.procs").write_text(f"{os.getpid()}\n")
    if owner is not None:
        if os.geteuid() != 0:
            pytest.skip("making a tree another uid owns needs root")
        for p in (base, base / "cgroup.procs", base / "cgroup.subtree_control"):
            os.chown(p, owner, owner)
    return base


def test_a_cgroup_of_its_own_is_delegated(tmp_path):
    base = fake_cgroup(tmp_path, owner=OTHER_UID)
    assert memory_cap.delegation(str(base), euid=OTHER_UID) is None


def test_someone_elses_cgroup_is_not_and_it_says_why_in_one_line(tmp_path):
    base = fake_cgroup(tmp_path, owner=OTHER_UID)
    why = memory_cap.delegation(str(base), euid=OTHER_UID + 1)
    assert why is not None and "\n" not in why
    assert (
        f"{base} is not delegated to this process (owned by uid {OTHER_UID}, this is uid {OTHER_UID + 1}"
        in why
    )
    assert "Delegate=yes" in why


def test_a_cgroup_without_the_memory_controller_is_not(tmp_path):
    base = fake_cgroup(tmp_path, controllers="cpu pids")
    why = memory_cap.delegation(str(base), euid=os.geteuid())
    assert why == f"v2: the memory controller is not delegated to {base} (cgroup.controllers: cpu pids)"


def test_systemd_delegate_mark_is_enough(tmp_path):
    base = fake_cgroup(tmp_path, owner=OTHER_UID)
    try:
        os.setxattr(base, "user.delegate", b"1")
    except OSError as exc:
        pytest.skip(f"this filesystem keeps no user xattrs ({exc.strerror})")
    assert memory_cap.delegation(str(base), euid=OTHER_UID + 1) is None


def test_the_leaf_its_processes_moved_to_is_recognised(tmp_path):
    base = fake_cgroup(tmp_path)
    assert memory_cap.move_to_leaf(str(base)) == [os.getpid()]
    assert (base / memory_cap.LEAF / "cgroup.procs").read_text() == str(os.getpid())
    cgroup_file = tmp_path / "cgroup"
    cgroup_file.write_text(f"0::/user.slice/kw.service/{memory_cap.LEAF}\n")
    mounts = {"v2": (str(tmp_path), "/")}
    assert memory_cap._own_dir("v2", mounts, str(cgroup_file)) == str(
        base
    )  # the delegated cgroup, not the leaf
