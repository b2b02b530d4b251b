"""The task loader's child process: it runs a task's own code (its import, inputs, model and forward) for
tasks/loader.py, so that a task that hangs, spins, crashes or prints cannot take the caller with it.

Started as `python -m kernelwright.tasks.load_child REPLY_FD PARENT_PID` and kept for many loads (a folder
of tasks pays for importing torch once). Requests come as JSON lines on stdin ({"source", "name", "path"});
replies go as JSON lines on REPLY_FD: {"ready": true} once torch is imported, then per request a
{"phase": "..."} before each step of the task's code (tasks.module.report_phase, and a forward pre-hook
here), and last {"task": {...}} (a `Task` as plain data) or {"error": "one line"}. A small built-in task
is loaded before "ready", so torch's first-call set-up is not counted against the first task's deadline.
A task that crashes leaves no core file (the core size limit is 0 here).

Its stdout is the caller's stderr (set by the caller): what a task prints never reaches the stdout of a
command that prints JSON. It leaves when stdin closes or when its parent is gone.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from typing import Any

_WARM_UP = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(5, 3)

    def forward(self, x):
        return torch.softmax(self.linear(x), dim=-1).sum(dim=0)

def get_inputs():
    return [torch.randn(4, 5)]

def get_init_inputs():
    return []

def get_small_inputs():
    return [torch.randn(3, 5)]
"""


def _watch_parent(parent: int) -> None:
    # A parent killed without closing our stdin (SIGKILL) must not leave a spinning task behind.
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(0)


def main() -> int:
    reply_fd, parent = int(sys.argv[1]), int(sys.argv[2])
    # A crash is reported by the parent in one line; a core dump of a process holding torch would take
    # seconds and leave hundreds of MB in the user's folder.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="parent-watch").start()
    out = os.fdopen(reply_fd, "w", encoding="utf-8")
    send_lock = threading.Lock()

    def send(message: dict[str, Any]) -> None:
        with send_lock:
            out.write(json.dumps(message) + "\n")
            out.flush()

    import torch

    from kernelwright.tasks.errors import TaskError, describe_exception
    from kernelwright.tasks.loader import load_here
    from kernelwright.tasks.module import set_phase_reporter

    state = {"phase": "", "inputs": "get_inputs()"}

    def report(what: str) -> None:
        if what.startswith("get_") and what.endswith("inputs()") and "init" not in what:
            state["inputs"] = what
        if what != state["phase"]:
            state["phase"] = what
            send({"phase": what})

    def on_forward(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        device = next((a.device.type for a in args if isinstance(a, torch.Tensor)), "cpu")
        where = "on the meta device (shapes only)" if device == "meta" else f"on {device.upper()}"
        report(f"the forward {where} with {state['inputs']}")

    # The first analysis in a process pays torch's first-call set-up (seconds on a loaded machine); paid
    # here, before "ready", it is not counted against the first task's deadline.
    load_here(_WARM_UP, "kw_warm_up", None)
    set_phase_reporter(report)
    torch.nn.modules.module.register_module_forward_pre_hook(on_forward)
    send({"ready": True})
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        state["phase"], state["inputs"] = "", "get_inputs()"
        # Settings one task changes process-wide must not leak into the next task's analysis.
        torch.set_default_dtype(torch.float32)
        torch.set_grad_enabled(True)
        torch.set_default_device(None)
        where = request["path"] or f"<task {request['name']}>"
        try:
            task = load_here(request["source"], request["name"], request["path"])
        except TaskError as exc:
            send({"error": str(exc)})
        except BaseException as exc:  # noqa: BLE001 - SystemExit from a task's top level included
            send({"error": f"{where}: {state['phase'] or 'loading'} raised {describe_exception(exc, where)}"})
        else:
            send({"task": task.model_dump(mode="json")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
