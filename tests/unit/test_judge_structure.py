"""The judge and the candidate process stay composed of small parts (README, "How a candidate is judged"):
no module of theirs over 600 lines, no class over 400, no class of theirs built on another of theirs,
and no underscore name imported from one hardware/ module into another."""

import ast
from pathlib import Path

HARDWARE = Path(__file__).resolve().parents[2] / "hardware"
PARTS = sorted(
    [
        *(HARDWARE / "judge").glob("*.py"),
        *(HARDWARE / "candidate").glob("*.py"),
        HARDWARE / "isolation" / "candidate_process.py",
    ]
)


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def test_the_judges_and_the_candidate_process_modules_and_classes_stay_small():
    assert len(PARTS) >= 10, [p.name for p in PARTS]
    too_long = []
    for path in PARTS:
        lines = path.read_text().count("\n")
        if lines > 600:
            too_long.append(f"{path.relative_to(HARDWARE)}: {lines} lines")
        for node in _tree(path).body:
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > 400:
                too_long.append(
                    f"{path.relative_to(HARDWARE)}: class {node.name}, {node.end_lineno - node.lineno + 1} lines"
                )
    assert not too_long, too_long


def test_no_part_of_the_judge_or_the_candidate_process_inherits_another():
    ours = {node.name for path in PARTS for node in _tree(path).body if isinstance(node, ast.ClassDef)}
    chained = [
        f"{path.name}: {node.name}({base.id})"
        for path in PARTS
        for node in _tree(path).body
        if isinstance(node, ast.ClassDef)
        for base in node.bases
        if isinstance(base, ast.Name) and base.id in ours
    ]
    assert not chained, chained


def test_no_private_name_crosses_a_hardware_module():
    crossing = []
    for path in sorted(HARDWARE.rglob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernelwright.hardware."):
                crossing += [
                    f"{path.name} imports {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not crossing, crossing
