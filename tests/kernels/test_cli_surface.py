"""The command line's surface: fast help, --version, defaults shown, one-line answers to bad input and
damaged state, and folder runs with a summary (`show` and a run's failures, which need a scripted model
server, are in tests/integration/test_graph_cli.py).

Runs use the offline writer on the bundled ReLU task at budget 1-2 (CPU, Triton interpreter); memory is a
real Chroma folder in tmp. A read-only memory is a read-only bind mount in a private mount namespace
(`unshare -m`, as root), since file modes do not stop root.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kernelwright
from kernelwright.cli.main import main as cli_main
from kernelwright.graphs.context import Context
from kernelwright.nodes import resources

ROOT = Path(__file__).resolve().parents[2]
KW = ROOT / ".venv" / "bin" / "kernelwright"
RELU = ROOT / "tasks" / "level1" / "01_relu.py"


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in ("OPENAI_BASE_URL", "KERNELWRIGHT_BASE_URL", "KERNELWRIGHT_MODEL", "KERNELWRIGHT_DEVICE"):
        monkeypatch.delenv(var, raising=False)
    yield
    resources.close_all()


def kw(*args: str, **kw_env: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **kw_env}
    return subprocess.run([str(KW), *args], capture_output=True, text=True, env=env, timeout=300)


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def test_help_answers_in_under_a_second_and_version_and_defaults_are_shown():
    best = min(_timed(["--help"]) for _ in range(3))
    assert best < 1.0, f"kernelwright --help took {best:.2f} s"
    assert min(_timed(["optimize", "--budget", "x"], rc=2) for _ in range(2)) < 1.0
    assert kw("--version").stdout.strip() == f"kernelwright {kernelwright.__version__}"
    assert importlib.metadata.version("kernelwright") == kernelwright.__version__
    text = " ".join(kw("optimize", "--help").stdout.split())
    defaults = Context()
    assert f"(default: {defaults.model};" in text and f"(default: {defaults.device}," in text
    assert f"(default: {defaults.budget};" in text


def _timed(args: list[str], rc: int = 0) -> float:
    t0 = time.monotonic()
    done = kw(*args)
    assert done.returncode == rc, done.stderr
    return time.monotonic() - t0


def test_bad_input_is_one_line_and_nothing_is_made(tmp_path, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    cases = [
        (["optimize", str(RELU), "--budget", "0"], "--budget: must be at least 1"),
        (["optimize", str(RELU), "--out", str(a_file)], "exists and is not a folder"),
        (["optimize", str(RELU), "--out", str(a_file / "run")], "is not a folder"),
        (["optimize", "--resume", str(tmp_path / "nowhere")], "no such run directory"),
        (["eval", str(ROOT / "tasks" / "level1"), str(a_file)], "is a folder: eval takes one task file"),
    ]
    for args, expected in cases:
        try:
            code = cli_main([*args, "--memory", str(tmp_path / "m")] if args[0] == "optimize" else args)
        except SystemExit as exc:  # argparse's own errors
            code = int(exc.code or 0)
        assert code == 2, args
        assert expected in one_line(capsys.readouterr().err), args
    broken = tmp_path / "broken_run"
    broken.mkdir()
    (broken / "run.json").write_text('{"thread_id": "x", "inp')
    assert cli_main(["optimize", "--resume", str(broken)]) == 2
    assert "run.json is damaged" in one_line(capsys.readouterr().err)
    assert not (tmp_path / "m").exists() or not any((tmp_path / "m").glob("*/run.json"))


def test_damaged_memory_is_named_and_no_run_folder_is_left(tmp_path, capsys):
    mem = tmp_path / "mem"
    _memory_with_rules(mem, 30)
    deleted = tmp_path / "deleted"
    shutil.copytree(mem, deleted)
    (deleted / "chroma.sqlite3").unlink()
    assert cli_main(["memory", "stats", "--memory", str(deleted)]) == 1
    line = one_line(capsys.readouterr().err)
    assert "is damaged: chroma.sqlite3 is missing but 1 index folder(s) remain" in line
    assert not (deleted / "chroma.sqlite3").exists()  # no empty memory made in its place
    overwritten = tmp_path / "overwritten"
    shutil.copytree(mem, overwritten)
    (overwritten / "chroma.sqlite3").write_text("not a database\n")
    out = tmp_path / "run"
    assert cli_main(["optimize", str(RELU), "--memory", str(overwritten), "--out", str(out)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "is damaged: chroma.sqlite3 file is not a database" in line and "no record can be read" in line
    assert not out.exists()
    # a damaged page in the middle: the rows SQLite can still read are exported
    scratched = tmp_path / "scratched"
    shutil.copytree(mem, scratched)
    db = scratched / "chroma.sqlite3"
    data = bytearray(db.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 4096] = b"\xab" * 4096
    db.write_bytes(bytes(data))
    assert cli_main(["memory", "export", str(tmp_path / "saved.jsonl"), "--memory", str(scratched)]) == 0
    captured = capsys.readouterr()
    assert "is damaged" in captured.err and "salvaged" in captured.out
    saved = int(captured.out.split(" rules")[0].rsplit(" ", 1)[1])
    assert 0 < saved <= 30
    assert (
        cli_main(["memory", "import", str(tmp_path / "saved.jsonl"), "--memory", str(tmp_path / "new")]) == 0
    )
    assert f"imported 0 cases, {saved} rules" in capsys.readouterr().out


def _memory_with_rules(path: Path, n: int) -> int:
    from kernelwright.memory import RuleCandidate, open_memory

    mem = open_memory(path)
    try:
        for i in range(n):
            mem.rules.add(
                RuleCandidate(
                    text=f"You cannot use design=d{i} on cpu: compile_error number {i}",
                    error_kind="compile_error",
                    error="e",
                    case_id=f"c{i}",
                    op_families=["pointwise"],
                    hardware="cpu",
                )
            )
    finally:
        mem.close()
    return n


@pytest.mark.slow  # an optimize run in a mount namespace, ~8 s
def test_read_only_memory_can_be_read_but_not_run_into(tmp_path):
    mem = tmp_path / "mem"
    _memory_with_rules(mem, 2)
    script = (
        f"mount --bind {mem} {mem} && mount -o remount,bind,ro {mem} && "
        f"{KW} memory stats --json --memory {mem} && "
        f"{{ {KW} optimize {RELU} --memory {mem} --out {tmp_path / 'run'}; echo rc=$?; }}"
    )
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout[: done.stdout.rindex("}") + 1])
    assert stats["rules"] == 2
    assert "rc=2" in done.stdout and "is read-only" in one_line(done.stderr)
    assert not (tmp_path / "run").exists()


def test_a_folder_loads_every_task_first_and_writes_a_readable_summary(tmp_path, capsys, monkeypatch):
    """Run through the command's entry point in this process, whose imports are already made (the other runs
    here are processes)."""
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(RELU, suite / "01_relu_with_a_rather_long_name_for_the_summary_table.py")
    (suite / "02_broken.py").write_text("import torch\n\ndef get_inputs():\n    return []\n")
    suite_names = sorted(p.stem for p in suite.glob("*.py"))
    out = tmp_path / "out"
    monkeypatch.setenv("COLUMNS", "200")
    code = cli_main(["optimize", str(suite), "--budget", "1", "--device", "cpu", "--memory", str(tmp_path / "m"),
                     "--out", str(out)])  # fmt: skip
    done = capsys.readouterr()
    assert code == 1, done.err
    assert "02_broken: " in done.err and "no Model class" in done.err and "(skipped)" in done.err
    assert not (out / "02_broken").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert [s["task"] for s in summary] == [suite_names[0], "02_broken"] and "error" in summary[1]
    text = (out / "summary.txt").read_text()
    assert text in done.out
    assert all(len(line) <= 80 for line in text.splitlines()), text


def _gpu_visible() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(_gpu_visible(), reason="checks the answer where no GPU is visible")
def test_flags_are_checked_before_anything_is_made(tmp_path, capsys, monkeypatch):
    """A device or target this machine cannot give, or a model that cannot be used, is one line, exit 2,
    and no folder, run.json, checkpoint or memory is made: for a task file, a folder of tasks and a bench
    alike."""
    runs, mem = tmp_path / "runs", tmp_path / "memory"
    expected = "kernelwright optimize: device cuda: no GPU is visible here; use cpu (or auto)"
    folder = [str(RELU.parent), "--out", str(tmp_path / "out")]
    monkeypatch.setenv("KERNELWRIGHT_RUNS", str(runs))
    code = cli_main(["optimize", *folder, "--device", "cuda", "--memory", str(mem)])
    done = capsys.readouterr()
    assert code == 2 and done.out == "", done.err
    assert one_line(done.err) == expected  # once, not once per task
    assert cli_main(["optimize", str(RELU), "--device", "cuda", "--memory", str(mem)]) == 2
    assert one_line(capsys.readouterr().err) == expected
    assert cli_main(["optimize", str(RELU), "--model", "m", "--base-url", "foo", "--memory", str(mem)]) == 2
    assert "cannot reach the OpenAI-compatible server at foo" in one_line(capsys.readouterr().err)
    for command in ("optimize", "bench"):
        args = [command, str(RELU.parent), "--device", "cpu", "--target", "nvidia-h900", "--memory", str(mem)]
        assert cli_main(args) == 2, args
        assert "unknown target 'nvidia-h900'" in one_line(capsys.readouterr().err), args
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing made: no runs root, memory or --out


def test_an_out_folder_holding_another_run_is_refused(tmp_path, capsys):
    """One folder, one run: --out naming a folder that holds a run (one a Studio run left, one an earlier
    optimize left) is refused in one line, and nothing in it changes. Through the command's entry point in
    this process (the refusal comes before any judge or model is started)."""
    studio = tmp_path / "studio_run"
    studio.mkdir()
    (studio / ".run-id").write_text("1f0c2a7e-0000-7000-8000-000000000001\n")
    (studio / "evaluations.jsonl").write_text("{}\n")
    earlier = tmp_path / "earlier_run"
    earlier.mkdir()
    (earlier / "run.json").write_text(json.dumps({"thread_id": "abc123", "input": {}, "context": {}}))
    (earlier / "result.json").write_text("{}\n")
    before = {p: p.read_bytes() for d in (studio, earlier) for p in d.iterdir()}
    for folder, expected in (
        (studio, "already holds run 1f0c2a7e-0000-7000-8000-000000000001: give another folder"),
        (earlier, f"already holds run abc123: continue it with kernelwright optimize --resume {earlier}"),
    ):
        code = cli_main(["optimize", str(RELU), "--device", "cpu", "--memory", "off", "--out", str(folder)])
        err = capsys.readouterr().err
        assert code == 2, err
        assert expected in one_line(err)
    assert {p: p.read_bytes() for d in (studio, earlier) for p in d.iterdir()} == before


def _make_run_command() -> str:
    """The command `make run` runs (install left out), with this checkout's kernelwright and the ReLU task."""
    done = subprocess.run(
        ["make", "-s", "-n", "run", f"KW={KW}", f"RUN_TASK={RELU}"], cwd=ROOT, capture_output=True, text=True
    )
    lines = [line for line in done.stdout.splitlines() if f"{KW} optimize" in line]
    assert len(lines) == 1, done.stdout
    return lines[0]


@pytest.mark.slow  # ~40 s: two offline runs end to end
def test_make_run_twice_makes_two_runs_in_two_folders(tmp_path):
    """The second `make run` works and prints its result: each run has a folder of its own, whose
    evaluation log holds that run only; the first folder, named with --out, is refused, not mixed."""
    command = _make_run_command() + f" --budget 1 --memory {tmp_path / 'memory'}"
    for _ in range(2):
        done = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr
        assert "wrote: " in done.stdout and "result.json" in done.stdout
    folders = sorted((tmp_path / "runs").iterdir())
    assert len(folders) == 2 and all(f.name.startswith("01_relu-") for f in folders), folders
    ids = []
    for folder in folders:
        result = json.loads((folder / "result.json").read_text())
        logged = {
            json.loads(line)["run_id"] for line in (folder / "evaluations.jsonl").read_text().splitlines()
        }
        assert logged == {result["run_id"]}, folder
        ids.append(result["run_id"])
    assert ids[0] != ids[1]
    done = subprocess.run(
        ["bash", "-c", command + f" --out {folders[0]}"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 2 and "--resume" in one_line(done.stderr), done.stderr


def test_nothing_is_learned_from_timeouts_or_infrastructure_failures():
    from kernelwright.hardware.result import EvalResult
    from kernelwright.nodes.reflector import not_the_kernels_fault

    def res(kind: str, error: str = "") -> EvalResult:
        return EvalResult(error_kind=kind, error=error)  # type: ignore[arg-type]

    assert not_the_kernels_fault(res("timeout"), "code", offline_writer=True)
    assert not_the_kernels_fault(res("harness_error"), "code", offline_writer=False)
    assert not_the_kernels_fault(res("crash", "the worker died from SIGKILL during ..."), "code", False)
    assert not_the_kernels_fault(res("static_check"), None, offline_writer=True)
    assert not_the_kernels_fault(res("crash", "the worker died from SIGSEGV"), "code", False) is None
    assert not_the_kernels_fault(res("compile_error"), "code", offline_writer=True) is None
    assert not_the_kernels_fault(res("static_check"), None, offline_writer=False) is None
    # A mismatch is the kernel's on the CPU interpreter too, bf16 dots included: the judge's fork server
    # makes the interpreter's bf16 dots multiply values (tests/kernels/test_interpreter_fixes.py).
    on_cpu = EvalResult(error_kind="mismatch", target="cpu-interpreter")
    assert not_the_kernels_fault(on_cpu, "acc = tl.dot(a, b, acc)", True) is None


if sys.platform != "linux":  # pragma: no cover - unshare and bind mounts are Linux
    pytestmark = pytest.mark.skip("Linux only")
