"""Tripwires in the candidate process on what would let a candidate tell a checked call from a timed one,
or run work no one records: installed before the candidate is imported, each replaces a module attribute
with a function that fails the candidate when it is used.

- Introspection (`INTROSPECTION`): torch's dispatch and function mode stacks and dispatch key state (the
  evidence recorder is a dispatch mode on every checked call and on no timed one), the interpreter's
  frames and threads (which harness function called forward), the stack walkers of `traceback`. Tripped
  only when called from the candidate's own source file: torch calls some of these itself.
  hardware.judge.static_check forbids these names in the source; the tripwires catch what it cannot see
  (a name computed at run time, `getattr(torch._C, "_len_" + "torch_dispatch_stack")`).
- CUDA graphs (`GRAPHS`): a graph's replay launches kernels that neither the recorder nor Triton's
  launcher sees, so the judge could not tell what forward ran. Tripped whoever calls them (the harness
  never uses graphs; torch.cuda.graph calls capture for the candidate).

A tripped wire raises in the candidate's code (a clear error) and is remembered, so a candidate that
catches the error still fails: ForwardGuard checks `tripped` after every call, and a tripwire taken off
(the original put back) fails it too. The originals are kept in the wrappers' closures: a candidate that
reaches them by introspecting functions (statically forbidden: `__closure__`, `cell_contents`) or through
its own memory is beyond this, as README's "What this cannot prove" says.
"""

from __future__ import annotations

import sys
from typing import Any

INTROSPECTION: dict[str, tuple[str, ...]] = {
    "torch._C": tuple(
        """_len_torch_dispatch_stack _get_dispatch_stack_at _len_torch_function_stack _get_function_stack_at
        _get_dispatch_mode _is_torch_function_mode_enabled _dispatch_tls_is_dispatch_key_included
        _dispatch_tls_is_dispatch_key_excluded _dispatch_tls_local_include_set _dispatch_tls_local_exclude_set
        _pop_torch_dispatch_stack _pop_torch_function_stack""".split()
    ),
    "torch.utils._python_dispatch": tuple(
        """_get_current_dispatch_mode _get_current_dispatch_mode_stack _is_in_torch_dispatch_mode
        is_in_torch_dispatch_mode _is_in_non_infra_torch_dispatch_mode any_torch_dispatch_mode_on_stack
        _detect_infra_mode _pop_mode _pop_mode_temporarily _disable_current_modes""".split()
    ),
    "torch.overrides": (
        "_get_current_function_mode",
        "_get_current_function_mode_stack",
        "_pop_mode",
        "_pop_mode_temporarily",
    ),
    "sys": ("_getframe", "_current_frames"),
    "traceback": ("extract_stack", "format_stack", "print_stack", "walk_stack"),
}
"""Module -> the functions a candidate may not call (see the module docstring)."""
GRAPHS: dict[str, tuple[str, ...]] = {
    "torch.cuda": ("CUDAGraph", "graph", "make_graphed_callables", "graph_pool_handle"),
    "torch.cuda.graphs": ("CUDAGraph", "graph", "make_graphed_callables", "graph_pool_handle"),
    "torch._C": ("_CUDAGraph",),
}
GRAPHS_WHY = (
    "CUDA graphs are not allowed in a candidate: a graph's replay launches kernels that neither the "
    "harness's recorder nor Triton's launcher sees, so the judge cannot check what forward ran; launch "
    "the Triton kernels from forward"
)


class Tripwires:
    """The wires installed in one candidate process (see the module docstring)."""

    def __init__(self, candidate_file: str) -> None:
        self.candidate_file = candidate_file
        self.tripped: list[str] = []
        """What was used, in order ("torch._C._len_torch_dispatch_stack", "CUDA graphs: ...")."""
        self.installed: list[tuple[Any, str, Any]] = []
        self._getframe = sys._getframe

    def install(self) -> None:
        for module, names in INTROSPECTION.items():
            for name in names:
                self._wire(module, name, only_candidate=True)
        for module, names in GRAPHS.items():
            for name in names:
                self._wire(module, name, only_candidate=False)

    def _wire(self, module: str, name: str, *, only_candidate: bool) -> None:
        owner = sys.modules.get(module)
        original = getattr(owner, name, None) if owner is not None else None
        if original is None:
            return
        label, getframe, file, tripped = f"{module}.{name}", self._getframe, self.candidate_file, self.tripped
        frames = module == "sys" and name == "_getframe"

        def tripwire(*args: Any, **kwargs: Any) -> Any:
            if not only_candidate or getframe(1).f_code.co_filename == file:
                tripped.append(label if only_candidate else f"{label} ({GRAPHS_WHY})")
                raise RuntimeError(
                    f"{label} is not available to a candidate: "
                    + (
                        "it tells the calls the judge checks from the ones it times"
                        if only_candidate
                        else GRAPHS_WHY
                    )
                )
            if frames:  # sys._getframe(depth) for its caller, not for this function
                depth = int(args[0]) if args else int(kwargs.get("depth", 0))
                return original(depth + 1)
            return original(*args, **kwargs)

        tripwire.__name__ = getattr(original, "__name__", name)
        tripwire.__doc__ = getattr(original, "__doc__", None)
        setattr(owner, name, tripwire)
        self.installed.append((owner, name, tripwire))

    def problem(self) -> str | None:
        """Why the candidate fails, if a wire was tripped or taken off; None otherwise."""
        off = [
            f"{getattr(o, '__name__', '?')}.{n}" for o, n, w in self.installed if getattr(o, n, None) is not w
        ]
        if self.tripped:
            first = self.tripped[0]
            more = f" (and {len(self.tripped) - 1} more use(s))" if len(self.tripped) > 1 else ""
            if "CUDA graphs" in first:
                return f"used {first.split(' (', 1)[0]}{more}: {GRAPHS_WHY}"
            return (
                f"called {first}{more}, which tells the calls the judge checks from the ones it times: a "
                "candidate may not read the harness's dispatch or function modes, frames or threads"
            )
        if off:
            return f"took off the harness's tripwire on {', '.join(off[:4])}"
        return None


def installed(candidate_file: str) -> Tripwires:
    wires = Tripwires(candidate_file)
    wires.install()
    return wires
