"""Writes the programs call 2 judges (CPU): for level1_bf16 14-17, the writer's root (now WS=4: the Gluon
ping-pong kernel first), the same with WS=5, and with WS=0 (the Triton program the root was before)."""

import sys
from pathlib import Path

sys.path.insert(0, "benchmarks")
from _common import root_program, task_path  # noqa: E402

from kernelwright.hardware.targets import get_target  # noqa: E402
from kernelwright.providers.offline.choice.variants import program_variant  # noqa: E402
from kernelwright.tasks import load_task  # noqa: E402

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
for spec in ["level1_bf16/16", "level1_bf16/17", "level1_bf16/15", "level1_bf16/14"]:
    task = load_task(task_path(spec))
    key = spec.split("/")[1][:2]
    root = root_program(task, get_target("nvidia-h200")).code
    (out / f"t{key}_ws4.py").write_text(root)
    for ws in (0, 5):
        code = program_variant(task.source, task.name, "persistent", {"WS": ws}).code
        (out / f"t{key}_ws{ws}.py").write_text(code)
    print(spec, root.splitlines()[0])
