"""Bad input and a bad disk, as a user meets them: one clear line, the right exit status, nothing lost.

- a run folder whose filesystem is full: the evaluation log (nodes/evaluations.py) says so in one line
  with the verdict it could not log, and what it held stays readable; tested on a real full filesystem
  (a small tmpfs in a private mount namespace, as root) and under RLIMIT_FSIZE;
- memory folders: an empty (0-byte) database is damage, not an empty memory; a folder read-only by its
  permissions is read from a snapshot (tested as root without the capabilities that let root ignore
  permission bits: file modes alone do not stop root); reading a folder that does not exist makes nothing;
- `--json`: stdout holds the JSON only, whatever the process and its children print.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelwright.cli.main import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
KW = ROOT / ".venv" / "bin" / "kernelwright"


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


# --- the evaluation log on a full disk ------------------------------------------------------------------

_LOG_SCRIPT = textwrap.dedent(
    """
    import json, os, resource, signal, sys
    from kernelwright.hardware.result import EvalResult
    from kernelwright.nodes.evaluations import EvaluationEntry, EvaluationLog, RunFolderError

    run_dir, how = sys.argv[1], sys.argv[2]
    log = EvaluationLog(run_dir)
    def entry(node):  # 8 KiB: more than what is left of the log's last page once the disk is full
        return EvaluationEntry(run_id="r", node_id=node, phase="verify", code_sha256="ab" * 32,
                               result=EvalResult(correct=True, stage="done", extra={"pad": "x" * 8192}))
    log.append(entry("n1"))
    if how == "fsize":
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of a signal
        size = os.path.getsize(log.path)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 1000, size + 1000))
    else:  # fill the filesystem
        fd = os.open(os.path.join(run_dir, "filler"), os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"x" * 4096):
                pass
        except OSError:
            pass
        os.close(fd)
    try:
        log.append(entry("n2"))
        print(json.dumps({"raised": None}))
    except RunFolderError as exc:
        print(json.dumps({"raised": str(exc), "kept": [e.node_id for e in log.entries()]}))
    """
)


def _log_on_full_disk(run_dir: Path, how: str) -> dict:
    cmd = [sys.executable, "-c", _LOG_SCRIPT, str(run_dir), how]
    if how == "tmpfs":
        mount = f'mount -t tmpfs -o size=64k tmpfs {run_dir} && exec "$@"'
        cmd = ["unshare", "-m", "sh", "-c", mount, "sh", *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _can_mount() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=16k tmpfs /mnt"],
                           capture_output=True, timeout=30)  # fmt: skip
    return probe.returncode == 0


@pytest.mark.parametrize("how", ["tmpfs", "fsize"])
def test_a_full_run_folder_is_one_line_with_the_verdict_and_the_log_stays_readable(tmp_path, how):
    if how == "tmpfs" and not _can_mount():
        pytest.skip("mounting a tmpfs needs root and a private mount namespace")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    got = _log_on_full_disk(run_dir, how)
    message = got["raised"]
    assert message is not None and "\n" not in message
    cause = "No space left on device" if how == "tmpfs" else "File too large"
    assert message.startswith(f"cannot write {run_dir / 'evaluations.jsonl'}: {cause};"), message
    assert "the evaluation of n2 (correct (not timed)) was not logged" in message
    assert f"kernelwright optimize --resume {run_dir}" in message
    assert got["kept"] == ["n1"]  # the entry logged before is still read back


def test_write_failures_from_any_writer_of_the_run_folder_are_one_line():
    import errno
    import sqlite3

    from kernelwright.nodes.evaluations import write_failure

    full = OSError(errno.ENOSPC, "No space left on device", "/runs/x/kernel.py")
    assert write_failure(full, "/runs/x") == (
        "cannot write /runs/x/kernel.py: No space left on device; the run stopped at its last checkpoint: "
        "make room, then continue with kernelwright optimize --resume /runs/x"
    )
    checkpoints = sqlite3.OperationalError("database or disk is full")
    assert write_failure(checkpoints, None).startswith("cannot write the run's checkpoints: database or disk")
    assert write_failure(OSError(errno.ENOENT, "No such file"), "/runs/x") is None
    assert write_failure(RuntimeError("disk is full"), "/runs/x") is None


# --- memory folders -------------------------------------------------------------------------------------


def _memory_with_a_rule(path: Path) -> None:
    from kernelwright.memory import RuleCandidate, open_memory

    mem = open_memory(path)
    try:
        mem.rules.add(RuleCandidate(text="You cannot use design=d on cpu", error_kind="compile_error",
                                    error="e", case_id="c1", op_families=["pointwise"], hardware="cpu"))  # fmt: skip
    finally:
        mem.close()


def test_an_empty_database_file_is_damage_not_an_empty_memory(tmp_path, capsys):
    from kernelwright.memory import MemoryDamagedError, open_memory

    mem = tmp_path / "mem"
    _memory_with_a_rule(mem)
    (mem / "chroma.sqlite3").write_bytes(b"")  # truncated to 0 bytes
    with pytest.raises(MemoryDamagedError, match=r"chroma.sqlite3 is empty \(0 bytes\)"):
        open_memory(mem)
    assert cli_main(["memory", "stats", "--memory", str(mem)]) == 1
    line = one_line(capsys.readouterr().err)
    assert f"memory at {mem} is damaged: chroma.sqlite3 is empty (0 bytes)" in line
    assert "1 index folder(s) remain" in line
    assert (mem / "chroma.sqlite3").stat().st_size == 0  # not made into a new, empty database
    out = tmp_path / "saved.jsonl"
    assert cli_main(["memory", "export", str(out), "--memory", str(mem)]) == 1
    assert "is damaged" in one_line(capsys.readouterr().err) and not out.exists()


def test_reading_a_memory_that_does_not_exist_makes_nothing(tmp_path, capsys):
    missing = tmp_path / "not" / "yet"
    assert cli_main(["memory", "stats", "--memory", str(missing)]) == 0
    assert "does not exist yet" in one_line(capsys.readouterr().out)
    assert cli_main(["memory", "stats", "--json", "--memory", str(missing)]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["exists"] is False and stats["cases"] == 0 and stats["rules"] == 0
    assert cli_main(["memory", "rules", "--json", "--memory", str(missing)]) == 0
    assert json.loads(capsys.readouterr().out) == []
    for action in (["export", str(tmp_path / "e.jsonl")], ["prune"], ["relabel"], ["forget", "rule-x"]):
        assert cli_main(["memory", *action, "--memory", str(missing)]) == 1, action
        assert "(the folder does not exist); nothing to" in one_line(capsys.readouterr().err)
    assert not (tmp_path / "not").exists() and not (tmp_path / "e.jsonl").exists()


_NO_DAC = ["setpriv", "--inh-caps=-dac_override,-dac_read_search,-fowner",
           "--bounding-set=-dac_override,-dac_read_search,-fowner"]  # fmt: skip


def test_a_memory_read_only_by_its_permissions_can_be_read(tmp_path):
    """As root without CAP_DAC_OVERRIDE (and its kin), permission bits bind as they do for a user."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to drop the capabilities that ignore permission bits")
    mem = tmp_path / "mem"
    _memory_with_a_rule(mem)
    subprocess.run(["chmod", "-R", "a-w", str(mem)], check=True)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    try:
        probe = subprocess.run([*_NO_DAC, "touch", str(mem / "probe")], capture_output=True, timeout=30)
        if probe.returncode == 0:
            pytest.skip("dropping the capabilities does not make permission bits bind here")
        env = {**os.environ, "HOME": str(tmp_path)}
        stats = subprocess.run([*_NO_DAC, str(KW), "memory", "stats", "--json", "--memory", str(mem)],
                               capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
        assert stats.returncode == 0, stats.stderr
        assert json.loads(stats.stdout)["rules"] == 1
        export = out_dir / "saved.jsonl"
        done = subprocess.run([*_NO_DAC, str(KW), "memory", "export", str(export), "--memory", str(mem)],
                              capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "exported 0 cases, 1 rules" in done.stdout
        assert len(export.read_text().splitlines()) == 1
        assert sorted(p.name for p in mem.iterdir() if not p.is_dir()) == sorted(
            [".kernelwright.generation", ".kernelwright.lock", "chroma.sqlite3"]
        )  # nothing written into the folder
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(mem)], check=False)


# --- stdout of --json commands --------------------------------------------------------------------------


def test_json_stdout_holds_only_the_json_whatever_the_process_and_its_children_print(tmp_path):
    script = textwrap.dedent(
        """
        import json, subprocess, sys
        from kernelwright.cli.stdout_json import json_only_stdout, print_json
        with json_only_stdout():
            print("a stray print in this process")
            subprocess.run([sys.executable, "-c", "print('a child prints')"], check=True)
            print_json(json.dumps({"answer": 42}))
        print("after: stdout as before")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"answer": 42}\nafter: stdout as before\n'
    assert "a stray print in this process" in done.stderr and "a child prints" in done.stderr
