"""The offline writer's structure, checked from its source: one operator table.

Each check reads providers/offline/ with `ast` (nothing is imported but the operator table itself), so a
second table of operator names, or a module grown past the limit, fails here before it spreads. Each
check is also run once on a small bad example, so it is known to fire.
"""

from __future__ import annotations

import ast
from pathlib import Path

import torch

from kernelwright.providers.offline import operators
from kernelwright.providers.offline.emit.emit import ExprContext, Operand, pw_expr

WRITER = Path(__file__).resolve().parents[2] / "providers" / "offline"


def _sources() -> dict[str, str]:
    """Every module of the writer, by its path under providers/offline/."""
    return {str(p.relative_to(WRITER)): p.read_text() for p in sorted(WRITER.rglob("*.py"))}


def _operator_names() -> set[str]:
    names = set(operators.ATEN_IDENTITY) | set(operators.CALL_IDENTITY) | set(operators.ROW_FAMILY_OF)
    for op in operators.OPERATORS:
        names |= {op.name, *op.aten, *op.calls}
    return names - {"identity", "cast", "full", "iota", "where", "max", "min", "sum", "mean"}


def _operator_tables(source: str, known: set[str]) -> list[str]:
    """Module-level assignments whose value spells five or more operator names (a table of operators)."""
    found = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        words = {
            w
            for c in ast.walk(node.value)
            if isinstance(c, ast.Constant) and isinstance(c.value, str)
            for w in c.value.split()
        }
        if len(words & known) >= 5:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.append(", ".join(ast.unparse(t) for t in targets))
    return found


def test_operators_are_named_in_one_table():
    known = _operator_names()
    copy = '_UNARY = {"relu": "relu", "sigmoid_": "sigmoid", "tanh": "tanh", "exp": "exp", "erf": "erf"}\n'
    assert _operator_tables(copy, known) == ["_UNARY"]  # the check fires on a copy
    assert _operator_tables('SPLIT = "neg abs exp log sqrt".split()\n', known) == ["SPLIT"]
    tables = {
        path: found
        for path, source in _sources().items()
        if path != "operators.py" and (found := _operator_tables(source, known))
    }
    assert tables == {}, f"operator names listed outside operators.py (use its views): {tables}"


def test_the_table_says_which_ops_pw_expr_writes():
    """An op is `generic` or read by the conv family exactly when emit.pw_expr has a Triton form for it."""
    for op in operators.OPERATORS:
        if op.arity == 0:  # full, iota: written by the generators, not as an expression
            continue
        args = [Operand("x", "f")] * op.arity + [Operand("0.5", "f")] * len(op.params)
        try:
            pw_expr(op.name, args, torch.bool if op.boolean else torch.float32, {}, ExprContext())
            written = True
        except ValueError:
            written = False
        assert written == (op.generic or bool(op.calls or op.module or op.params)), op.name


MAX_LINES = 600
MAX_CLASS_LINES = 400


def test_no_writer_module_is_longer_than_600_lines_and_no_class_than_400():
    long = {path: n for path, source in _sources().items() if (n := source.count("\n")) > MAX_LINES}
    assert long == {}, f"split these modules (over {MAX_LINES} lines): {long}"
    classes = {
        f"{path}:{node.name}": node.end_lineno - node.lineno + 1
        for path, source in _sources().items()
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES
    }
    assert classes == {}, f"split these classes (over {MAX_CLASS_LINES} lines): {classes}"


def _private_imports(path: str, source: str) -> list[str]:
    """`from kernelwright.providers.offline.X import _name`: a private name taken from another module.

    runtime/ is exempt: its modules hold program text, and the names they import (_kw_launch, _cdiv, ...)
    are the ones programs define and call, underscored so that they cannot clash with a task's names."""
    if path.startswith("runtime/"):
        return []
    return [
        f"{node.module}.{alias.name}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("kernelwright.providers.offline")
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]


def test_no_private_name_is_imported_across_writer_modules():
    bad = "from kernelwright.providers.offline.kinds.kernel_plan import _Load\n"
    assert _private_imports("emit/x.py", bad) == ["kernelwright.providers.offline.kinds.kernel_plan._Load"]
    found = {path: names for path, source in _sources().items() if (names := _private_imports(path, source))}
    assert found == {}, f"make these public or move them: {found}"


def test_op_families_are_one_table_for_tasks_and_the_writer():
    """A task's signature (tasks/analysis.py) and the writer's row-kernel families (operators.py) read one
    table, tasks/op_families.py."""
    import torch

    from kernelwright.tasks import analysis, op_families

    assert analysis._ATEN_FAMILY is op_families.ATEN_FAMILY
    assert operators.ROW_FAMILY_OF == {
        n: f for n, f in op_families.ATEN_FAMILY.items() if f in operators.ROW_FAMILIES[:-1]
    }
    assert analysis.op_family(torch.ops.aten.cumsum.default) == operators.ROW_FAMILY_OF["cumsum"] == "scan"


def test_no_two_writer_classes_share_a_name():
    where: dict[str, list[str]] = {}
    for path, source in _sources().items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(path)
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}


# The one module that chooses by the request's step kind: choice/policy.py, whose `choose_step` every
# choice goes through (the generic writer's kernels, and the whole-task families' FamilySpace through
# choice/whole_task.py). A module that read the step kind for itself would be a second policy.
CHOOSERS = {"choice/policy.py"}


def _chooses_by_step(source: str) -> bool:
    """Whether the module compares something's `.kind` with a request kind (large_step, small_step, repair)."""
    steps = {"large_step", "small_step", "repair"}
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Attribute)
            and node.left.attr == "kind"
        ):
            consts = [c for comp in node.comparators for c in ast.walk(comp) if isinstance(c, ast.Constant)]
            if any(c.value in steps for c in consts):
                return True
    return False


def test_no_new_module_chooses_by_the_request_kind():
    assert _chooses_by_step('if ctx.kind == "small_step":\n    pass\n')
    assert not _chooses_by_step('kind = "small_step"\n')
    choosers = {path for path, source in _sources().items() if _chooses_by_step(source)}
    assert choosers == CHOOSERS, f"one choice policy, not {sorted(choosers)} (use policy.choose_step)"
