"""Which of the host's device files a candidate process gets: null, zero, full, random, urandom, and on a
GPU only the nodes of the one GPU its judge judges on (`/dev/nvidia<minor>`) with the driver's shared
nodes (`nvidiactl`, `nvidia-uvm`, `nvidia-uvm-tools`, `nvidia-caps`); never another GPU's node, nor
`/dev/dri`, which CUDA does not use. hardware.isolation.confine binds these into the candidate's private
/dev and lets Landlock write only them.

The GPU is the one CUDA_VISIBLE_DEVICES names in the candidate's environment (the pool gives each judge
one): an index counts GPUs in PCI bus order, as the driver lists them under /proc/driver/nvidia/gpus (CUDA
orders equal GPUs so too; without that listing, the GPU nodes /dev holds, in order), a UUID is looked up
there; each names its `Device Minor`. None named (a CPU judge, the compile feedback's phases): no GPU node
at all. One this cannot resolve (a MIG UUID): every GPU's node, rather than none.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

BASICS = ("null", "zero", "full", "random", "urandom")
GPU_SHARED = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-caps")
"""The driver's nodes every GPU process opens (nvidia-caps: MIG's access files), whichever GPU it uses."""
DRIVER_GPUS = "/proc/driver/nvidia/gpus"

ALL_GPUS = -1
"""`choose` with this minor gives every GPU's node: for an entry nothing here can resolve (a MIG UUID)."""


def choose(listing: Iterable[str], minor: int | None) -> list[str]:
    """The device files, as /dev paths, of `listing` (the names in /dev) a candidate gets when it uses the
    GPU whose device minor is `minor` (None: no GPU; ALL_GPUS: every GPU's node)."""
    names = set(listing)
    found = [f"/dev/{n}" for n in BASICS if n in names]
    if minor is None:
        return found
    own = {f"nvidia{minor}"} if minor != ALL_GPUS else {n for n in names if n[6:].isdigit()}
    gpu = [n for n in names if n.startswith("nvidia") and (n in own or n in GPU_SHARED)]
    return found + [f"/dev/{n}" for n in sorted(gpu)]


def gpu_minor(
    entry: str | None, driver_dir: str = DRIVER_GPUS, present: list[int] | None = None
) -> int | None:
    """The device minor of the GPU a CUDA_VISIBLE_DEVICES value names (its first entry); None for none
    (unset or empty: no GPU), ALL_GPUS where it names one this cannot resolve. Without the driver's
    listing an index counts the GPU nodes `present` in /dev (a container shows only its own), in order."""
    first = (entry or "").split(",")[0].strip()
    if not first or first == "-1":
        return None
    gpus = []  # (PCI bus id, minor, uuid), in bus order
    try:
        for bus in sorted(os.listdir(driver_dir)):
            info = dict(
                (k.strip(), v.strip())
                for k, _, v in (
                    ln.partition(":") for ln in Path(driver_dir, bus, "information").read_text().splitlines()
                )
            )
            gpus.append((bus, int(info["Device Minor"]), info.get("GPU UUID", "")))
    except (OSError, KeyError, ValueError):
        gpus = []
    if first.isdigit():
        index = int(first)
        if gpus:
            return gpus[index][1] if index < len(gpus) else ALL_GPUS
        if present is not None:  # no driver listing: the index-th GPU node here
            return sorted(present)[index] if index < len(present) else ALL_GPUS
        return index
    for _, minor, uuid in gpus:
        if uuid and uuid == first:
            return minor
    return ALL_GPUS


def device_nodes() -> list[str]:
    """The device files a candidate process here may use (see the module docstring)."""
    try:
        listing = os.listdir("/dev")
    except OSError:
        return []
    present = [int(n[6:]) for n in listing if n.startswith("nvidia") and n[6:].isdigit()]
    return choose(listing, gpu_minor(os.environ.get("CUDA_VISIBLE_DEVICES"), present=present))
