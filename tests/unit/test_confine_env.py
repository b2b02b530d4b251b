"""The candidate process's environment (hardware/isolation/env.minimal_env): toolchain settings pass, secrets do not."""

from __future__ import annotations

from kernelwright.hardware.isolation.env import minimal_env


def test_toolchain_settings_pass_and_secrets_do_not(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    monkeypatch.setenv("TRITON_CACHE_DIR", "/shared/cache")  # the candidate gets its own
    monkeypatch.setenv("TEARDOWN_CUPTI", "1")  # the profiler's CUPTI teardown (benchmarks/judge_host_bias.py)
    env = minimal_env("cuda", home="/tmp/kw-home", gpu="1")
    assert "OPENAI_API_KEY" not in env and "HTTPS_PROXY" not in env
    assert env["TRITON_PRINT_AUTOTUNING"] == "1" and env["TEARDOWN_CUPTI"] == "1"
    assert env["TRITON_CACHE_DIR"] == "/tmp/kw-home/triton-cache" and env["CUDA_VISIBLE_DEVICES"] == "1"
    assert "TRITON_INTERPRET" not in env
    assert minimal_env("cpu", home="/tmp/kw-home")["TRITON_INTERPRET"] == "1"


def test_compile_phases_get_the_candidates_environment(monkeypatch):
    """The offline compile feedback's phases import the candidate: the caller's keys stay out of them too."""
    from kernelwright import IMPORT_ROOT
    from kernelwright.hardware.compile.feedback import phase_env

    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("HF_TOKEN", "hf-secret")
    monkeypatch.setenv("KERNELWRIGHT_CONFINE", "no-namespaces")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    for interpret in (True, False):
        env = phase_env(interpret)
        assert not [k for k in env if "KEY" in k or "TOKEN" in k], env
        assert env["CUDA_VISIBLE_DEVICES"] == "" and env["KERNELWRIGHT_CONFINE"] == "no-namespaces"
        assert env["PYTHONPATH"].split(":") == [str(IMPORT_ROOT), "/elsewhere"]
        assert env.get("TRITON_INTERPRET") == ("1" if interpret else None)
