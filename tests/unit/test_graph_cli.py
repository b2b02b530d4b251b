"""`kernelwright optimize` end to end: one task, a folder, --json, --resume of a finished run, bad input.

The model is a scripted OpenAI-compatible server on 127.0.0.1 (the CLI takes only model specs), so
these tests start a local server and are marked integration.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernelwright.graphs.cli import main as cli_main
from kernelwright.nodes import resources
from tests.fakes.chat import fenced
from tests.fakes.kernels import relu_compile_error, relu_kernel
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RELU = ROOT / "tasks" / "level1" / "01_relu.py"


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KERNELWRIGHT_BASE_URL", "KERNELWRIGHT_MODEL"):
        monkeypatch.delenv(var, raising=False)
    yield
    resources.close_all()


def answers():
    n = [0]

    def answer(body: dict) -> dict:
        n[0] += 1
        code = relu_compile_error(f"x{n[0]}") if n[0] == 1 else relu_kernel(f"d{n[0]}")
        return {"content": fenced(code)}

    return answer


@pytest.mark.slow
def test_one_task_with_out_dir(tmp_path, capsys):
    out = tmp_path / "out"
    with FakeOpenAIServer([], default=answers()) as server:
        code = cli_main(
            ["optimize", str(RELU), "--model", "fake-coder", "--base-url", server.base_url, "--budget", "3",
             "--device", "cpu", "--memory", str(tmp_path / "mem"), "--out", str(out), "--seed", "3"]
        )  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0
    assert {"result.json", "kernel.py", "report.html", "run.json", "checkpoints.sqlite"} <= {
        p.name for p in out.iterdir()
    }
    result = json.loads((out / "result.json").read_text())
    assert result["correct"] is True and result["seed"] == 3 and result["search"]["nodes"] == 3
    lines = [ln for ln in printed.splitlines() if ln.startswith("[")]
    assert len(lines) == 3
    assert "n1 <- n0" in lines[0] and "large_step" in lines[0] and "failed compile_error" in lines[0]
    assert "best: none yet" in lines[0]
    assert "n2 <- n1" in lines[1] and "repair" in lines[1] and "best: n2" in lines[1]
    assert "speed is unknown" in printed and str(out / "kernel.py") in printed

    # resuming a finished run returns its result without new work
    with FakeOpenAIServer([], default=answers()) as server2:
        saved = json.loads((out / "run.json").read_text())
        saved["context"]["base_url"] = server2.base_url
        (out / "run.json").write_text(json.dumps(saved))
        code = cli_main(["optimize", "--resume", str(out), "--json"])
        assert server2.chat_requests == []
    again = json.loads(capsys.readouterr().out)
    assert code == 0 and again["run_id"] == result["run_id"] and again["verdict"] == result["verdict"]


@pytest.mark.slow
def test_a_folder_gets_a_summary_table_and_json(tmp_path, capsys):
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(RELU, suite / "01_relu.py")
    shutil.copy(RELU, suite / "02_relu_again.py")
    (suite / "_helper.py").write_text("x = 1\n")  # not a task: skipped
    out = tmp_path / "out"
    with FakeOpenAIServer([], default=lambda body: {"content": fenced(relu_kernel())}) as server:
        args = ["optimize", str(suite), "--model", "fake-coder", "--base-url", server.base_url, "--budget", "1",
                "--device", "cpu", "--memory", str(tmp_path / "mem"), "--out", str(out)]  # fmt: skip
        assert cli_main(args) == 0
        printed = capsys.readouterr().out
        assert "summary" in printed and "01_relu" in printed and "02_relu_again" in printed
        assert (out / "01_relu" / "result.json").exists() and (out / "02_relu_again" / "kernel.py").exists()
        assert cli_main([*args[:-1], str(tmp_path / "out2"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["task"] for d in data] == ["01_relu", "02_relu_again"]
    assert all(d["correct"] for d in data)


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert cli_main(["optimize", str(tmp_path / "missing.py"), "--model", "offline"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such task file" in err[0]
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n\ndef get_inputs():\n    return []\n")
    assert cli_main(["optimize", str(bad), "--model", "offline", "--memory", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no Model class" in err[0]
    assert cli_main(["optimize", "--resume", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err
