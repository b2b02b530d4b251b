"""`kernelwright optimize` end to end: one task, a folder, --json, --resume of a finished run, bad input,
what a run prints and reports about its failures, and `show`.

The model is a scripted OpenAI-compatible server on 127.0.0.1 (the CLI takes only model specs), so
these tests start a local server and are marked integration.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernelwright.cli.main import main as cli_main
from kernelwright.nodes import resources
from tests.fakes.chat import fenced
from tests.fakes.kernels import relu_compile_error, relu_kernel
from tests.fakes.openai_server import FakeOpenAIServer

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


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


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


def test_a_run_shows_its_failures_resumes_with_a_verdict_and_show_prints_a_node(tmp_path, capsys):
    answers = iter(["I would rather not write code today.", fenced(relu_kernel("served").replace(
        "# kernelwright: family=pointwise design=served config=BLOCK=1024,num_warps=4\n", ""))])  # fmt: skip
    out = tmp_path / "run"
    with FakeOpenAIServer([], default=lambda body: {"content": next(answers)}) as server:
        args = ["optimize", str(RELU), "--model", "fake-coder", "--base-url", server.base_url, "--budget", "2",
                "--device", "cpu", "--memory", str(tmp_path / "m"), "--out", str(out)]  # fmt: skip
        assert cli_main(args) == 0
    printed = capsys.readouterr().out
    first = next(ln for ln in printed.splitlines() if "n1 <-" in ln)
    assert "failed static_check" in first and "no fenced ```python code block" in first
    # the report: the answer, the full feedback, a link to kernel.py, the kernel named without a header
    report = (out / "report.html").read_text()
    assert "I would rather not write code today." in report and "<details><summary>full feedback" in report
    assert "href='kernel.py'" in report and "no header; kernels:" in report and "- ms" not in report
    # resuming the finished run says so and prints its verdict
    assert cli_main(["optimize", "--resume", str(out)]) == 0
    assert "finished earlier, nothing left to do: Found a correct Triton kernel" in capsys.readouterr().out
    # show prints one node
    assert cli_main(["show", str(out), "n1"]) == 0
    shown = capsys.readouterr().out
    assert "I would rather not write code today." in shown and "--- feedback" in shown
    assert "no program taken from the answer" in shown
    assert cli_main(["show", str(out), "n9"]) == 2
    assert "has no node 'n9' (nodes: n1, n2)" in one_line(capsys.readouterr().err)
