"""The code the offline writer pastes into every program, as real Python modules.

Each module here holds program text between marker lines (`# program text: NAME` ... `# end of program
text: NAME`); `program_text(module, name)` returns what lies between them, verbatim, and that is what a
program carries. Being modules, the helpers are linted by ruff and type-checked by mypy where they run on
the host, and a test can import and call them. Each module starts with what its text needs from outside
it (torch, triton, and the helpers of other modules a program carries beside it), then `# fmt: off`: the
regions are kept byte for byte as programs have them, so the formatter leaves them alone.

Modules: host (the launchers' integer arithmetic, broadcast shapes, stride walks, the SM count), launch
(_kw_launch, TMA descriptors, aligned copies), jit_math (the @triton.jit math helpers pointwise ops call),
batchnorm (running statistics, conv's eval kernel and statistics combine), conv (conv launchers' host
side, the channels-last copy), pool (the pooling writer's kernels and host side), ws_gemm (Hopper's
Gluon GEMMs).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

_HERE = Path(__file__).resolve().parent


@cache
def _regions(module: str) -> dict[str, str]:
    path = _HERE / f"{module}.py"
    if not path.is_file():
        raise KeyError(f"no runtime module {module!r} in {_HERE}")
    regions: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in path.read_text().splitlines(keepends=True):
        if name is None:
            if line.startswith("# program text: "):
                name, lines = line.removeprefix("# program text: ").strip(), []
        elif line.rstrip("\n") == f"# end of program text: {name}":
            regions[name] = "".join(lines)
            name = None
        else:
            lines.append(line)
    if name is not None:
        raise ValueError(f"{path}: program text {name!r} has no end marker")
    return regions


def program_text(module: str, name: str) -> str:
    """The program text `name` of runtime/<module>.py, exactly as programs carry it."""
    regions = _regions(module)
    if name not in regions:
        raise KeyError(f"runtime/{module}.py has no program text {name!r} (it has {sorted(regions)})")
    return regions[name]
