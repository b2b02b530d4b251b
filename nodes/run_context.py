"""Runtime configuration of the optimize graph: one `Context` dataclass.

LangGraph passes it to every node as `runtime.context`; it is not part of the checkpointed state, so a
resumed run is given its context again (the CLI stores it in the run directory). Each field falls back
to an environment variable when not given, read when the Context is created.

It lives below the node modules, beside the state (nodes/state.py), so that the nodes and graphs/ both
import it at run time and nodes/ never imports graphs/.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from pydantic import ConfigDict, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from kernelwright.hardware.targets import check_device, get_target, resolve_device
from kernelwright.nodes.search import Budget, SearchConfig


def _env(name: str, default: Any, cast: Callable[[str], Any]) -> Callable[[], Any]:
    def read() -> Any:
        raw = os.environ.get(name)
        if raw is None or raw.strip() == "":
            return default
        try:
            return cast(raw.strip())
        except ValueError as exc:
            raise ValueError(f"environment variable {name}={raw!r} is not valid: {exc}") from exc

    return read


_PYTHON_ONLY = ("chat_model", "timing_source")
DEFAULT_RUNS_ROOT = "~/.kernelwright/runs"


def _flag(raw: str) -> bool:
    v = raw.lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected 1/0, true/false, yes/no or on/off")


def _opt_int(raw: str) -> int | None:
    return int(raw) if raw.lower() not in ("none", "0") else None


def _opt_float(raw: str) -> float | None:
    return float(raw) if raw.lower() not in ("none", "0") else None


def _opt_str(raw: str) -> str | None:
    return raw


def run_folder_tag(run_id: str) -> str:
    """8 hex digits that tell runs apart in folder names, whatever the form of their ids."""
    return hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:8]


def usable_device(device: str) -> str:
    """The device `device` resolves to here (hardware.targets.resolve_device), checked to exist: a
    ValueError in one line for cuda without a visible GPU or cuda:N past the GPUs visible."""
    resolved = resolve_device(device)
    if not resolved.startswith("cuda"):
        return resolved
    try:
        import torch
    except ImportError:
        raise ValueError(f"device {device}: torch is not installed here") from None
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n == 0:
        raise ValueError(f"device {device}: no GPU is visible here; use cpu (or auto)")
    index = int(resolved.partition(":")[2] or 0)
    if index >= n:
        raise ValueError(f"device {device}: there is no GPU {index}; {n} visible (0-{n - 1})")
    return resolved


@dataclass(kw_only=True)
class Context:
    """How one optimize run is carried out (environment variable in brackets)."""

    # LangGraph Studio's panel shows the JSON schema of this class: each field's docstring is its
    # description (see __get_pydantic_json_schema__ for defaults and the Python-only fields)
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(use_attribute_docstrings=True)

    model: str = field(default_factory=_env("KERNELWRIGHT_MODEL", "offline", str))
    """Chat model spec: "offline", "openai:<model>", any init_chat_model "provider:model", or a model name
    served at `base_url` [KERNELWRIGHT_MODEL]."""
    base_url: str | None = field(default_factory=_env("KERNELWRIGHT_BASE_URL", None, _opt_str))
    """OpenAI-compatible server (vLLM, SGLang, Ollama), e.g. http://127.0.0.1:8000/v1
    [KERNELWRIGHT_BASE_URL, else OPENAI_BASE_URL]."""
    budget: int = field(default_factory=_env("KERNELWRIGHT_BUDGET", 8, int))
    """Most candidate kernels to generate and evaluate [KERNELWRIGHT_BUDGET]."""
    budget_llm_calls: int | None = field(
        default_factory=_env("KERNELWRIGHT_BUDGET_LLM_CALLS", None, _opt_int)
    )
    """Most chat-model calls (coder and reflector); None for no limit [KERNELWRIGHT_BUDGET_LLM_CALLS]."""
    budget_wall_s: float | None = field(default_factory=_env("KERNELWRIGHT_BUDGET_WALL_S", None, _opt_float))
    """Most wall-clock seconds of searching; None for no limit [KERNELWRIGHT_BUDGET_WALL_S]."""
    device: str = field(default_factory=_env("KERNELWRIGHT_DEVICE", "auto", str))
    """Where candidates run: auto, cpu (Triton interpreter), cuda or cuda:N (hardware.targets.resolve_device)
    [KERNELWRIGHT_DEVICE]."""
    target: str | None = field(default_factory=_env("KERNELWRIGHT_TARGET", None, _opt_str))
    """Hardware profile to write for (e.g. nvidia-h200); None detects it from `device` [KERNELWRIGHT_TARGET]."""
    memory: str | None = field(default_factory=_env("KERNELWRIGHT_MEMORY", None, _opt_str))
    """Memory location (folder or Chroma server URL); None for ~/.kernelwright; "off" for none (nothing
    retrieved, nothing learned); "fresh" for an empty store in the run folder (`<run_dir>/memory`; a bench's
    in its folder), which fills as the run goes [KERNELWRIGHT_MEMORY]."""
    rules: bool = field(default_factory=_env("KERNELWRIGHT_RULES", True, _flag))
    """Inject and learn "You cannot ..." rules; off: cases only, no rules read or written
    [KERNELWRIGHT_RULES]."""
    allow_tf32: bool = field(default_factory=_env("KERNELWRIGHT_ALLOW_TF32", False, _flag))
    """Let fp32 matmul/conv use TF32 and check fp32 at TF32 tolerance [KERNELWRIGHT_ALLOW_TF32]."""
    seed: int = field(default_factory=_env("KERNELWRIGHT_SEED", 0, int))
    """Seed of the search and of the verification inputs [KERNELWRIGHT_SEED]."""
    workers: int = field(default_factory=_env("KERNELWRIGHT_WORKERS", 1, int))
    """Evaluation worker processes [KERNELWRIGHT_WORKERS]."""
    fanout: int = field(default_factory=_env("KERNELWRIGHT_FANOUT", 0, int))
    """Expansions in flight at once; 0 means one per worker [KERNELWRIGHT_FANOUT]."""
    c_explore: float = field(default_factory=_env("KERNELWRIGHT_C_EXPLORE", 0.3, float))
    """UCT exploration weight for descending into a child [KERNELWRIGHT_C_EXPLORE]."""
    c_expand: float = field(default_factory=_env("KERNELWRIGHT_C_EXPAND", 0.3, float))
    """UCT exploration weight for expanding a node [KERNELWRIGHT_C_EXPAND]."""
    p_large: float = field(default_factory=_env("KERNELWRIGHT_P_LARGE", 0.2, float))
    """Probability of a large step at a non-root node [KERNELWRIGHT_P_LARGE]."""
    max_repairs: int = field(default_factory=_env("KERNELWRIGHT_MAX_REPAIRS", 2, int))
    """Consecutive repairs allowed on one failing line [KERNELWRIGHT_MAX_REPAIRS]."""
    roofline_stop: float | None = field(default_factory=_env("KERNELWRIGHT_ROOFLINE_STOP", 0.9, _opt_float))
    """Stop once the best kernel reaches this fraction of the roofline floor and is no slower than
    torch.compile (where that was measured); None never [KERNELWRIGHT_ROOFLINE_STOP]."""
    context_tokens: int = field(default_factory=_env("KERNELWRIGHT_CONTEXT_TOKENS", 6000, int))
    """Token budget of the prompt the context manager builds [KERNELWRIGHT_CONTEXT_TOKENS]."""
    compile_check: bool = field(default_factory=_env("KERNELWRIGHT_COMPILE_CHECK", True, _flag))
    """On a CPU run for a GPU target (--target), also compile each verified kernel for that GPU (registers,
    spills, shared memory; no GPU needed) and fail kernels that do not compile for it
    [KERNELWRIGHT_COMPILE_CHECK]."""
    eval_timeout_s: float | None = field(
        default_factory=_env("KERNELWRIGHT_EVAL_TIMEOUT_S", None, _opt_float)
    )
    """Per-stage evaluation time limit; None for the harness defaults [KERNELWRIGHT_EVAL_TIMEOUT_S]."""
    llm_timeout_s: float = field(default_factory=_env("KERNELWRIGHT_LLM_TIMEOUT_S", 180.0, float))
    """Seconds one chat-model request may take before it is retried [KERNELWRIGHT_LLM_TIMEOUT_S]."""
    llm_retry_s: float = field(default_factory=_env("KERNELWRIGHT_LLM_RETRY_S", 120.0, float))
    """Seconds a model request failing with timeouts, dropped connections, HTTP 429 or 5xx is retried
    (backoff honouring Retry-After) before the run stops, resumable [KERNELWRIGHT_LLM_RETRY_S]."""
    llm_rules: bool = field(default_factory=_env("KERNELWRIGHT_LLM_RULES", True, _flag))
    """Let an LLM draft the rule for a failure (structured output); off: rules from error signatures
    [KERNELWRIGHT_LLM_RULES]."""
    run_dir: str | None = field(default_factory=_env("KERNELWRIGHT_RUN_DIR", None, _opt_str))
    """Where the run's outputs go; None: <runs_root>/<task>-<run id> [KERNELWRIGHT_RUN_DIR]."""
    runs_root: str = field(default_factory=_env("KERNELWRIGHT_RUNS", DEFAULT_RUNS_ROOT, str))
    """Folder that holds the run directories of runs given no run_dir. The default lies outside any source
    tree, so a `langgraph dev` watching the project does not reload when a run writes kernel.py
    [KERNELWRIGHT_RUNS]."""
    chat_model: Any = None
    """An already-built LangChain chat model to use instead of `model` (Python API only, not serializable)."""
    timing_source: Any = None
    """TEST ONLY: a callable(task_name, source, EvalResult) -> (runtime_ms, eager_ms) or None that replaces
    measured timings, so tests of "fastest correct" can run where timing is not meaningful (CPU)."""

    def __post_init__(self) -> None:
        if self.budget < 0:
            raise ValueError(f"budget must be >= 0, got {self.budget}")
        if self.llm_retry_s < 0:
            raise ValueError(f"llm_retry_s must be >= 0, got {self.llm_retry_s}")
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        check_device(self.device)
        if self.base_url is None:
            self.base_url = os.environ.get("OPENAI_BASE_URL") or None

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The schema Studio shows: every field with its description and its default as this process
        reads it (environment variables included); the Python-only fields left out, as they cannot be
        given as JSON (a run given them through Studio would drop them anyway)."""
        schema = handler.resolve_ref_schema(handler(core_schema))
        props = schema.get("properties", {})
        defaults = cls.defaults()
        for name in _PYTHON_ONLY:
            props.pop(name, None)
        schema["required"] = [r for r in schema.get("required", []) if r not in _PYTHON_ONLY]
        if not schema["required"]:
            schema.pop("required")
        for name, prop in props.items():
            if name in defaults:
                prop["default"] = defaults[name]
        return schema

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Each serializable field's value when not given (environment variables read now); a field whose
        environment variable is invalid is left out."""
        out: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in _PYTHON_ONLY:
                continue
            try:
                out[f.name] = f.default_factory() if callable(f.default_factory) else f.default
            except ValueError:
                continue
        return out

    @property
    def k(self) -> int:
        """Expansions kept in flight at once."""
        return self.fanout if self.fanout > 0 else self.workers

    @property
    def precision(self) -> str:
        return "tf32" if self.allow_tf32 else "strict"

    def default_run_dir(self, task_name: str, run_id: str) -> Path:
        """Where a run without `run_dir` writes: <runs_root>/<task>-<8 hex digits of a digest of the run id>.

        A digest, not the id's first characters: Studio's thread ids are uuid7, whose leading digits are a
        timestamp shared by every thread started in the same minute."""
        return Path(self.runs_root).expanduser() / f"{task_name}-{run_folder_tag(run_id)}"

    def check_usable(self) -> str:
        """The device this context runs on, after checking that it and the target exist here: a ValueError
        in one line otherwise (a GPU asked for where none is visible, an unknown target profile)."""
        device = usable_device(self.device)
        if self.target:
            get_target(self.target)
        return device

    def search_config(self) -> SearchConfig:
        return SearchConfig(
            c_explore=self.c_explore,
            c_expand=self.c_expand,
            p_large=self.p_large,
            max_repairs=self.max_repairs,
            seed=self.seed,
        )

    def search_budget(self) -> Budget:
        return Budget(
            candidates=self.budget,
            llm_calls=self.budget_llm_calls,
            wall_s=self.budget_wall_s,
            roofline_fraction=self.roofline_stop,
        )

    def to_json(self) -> dict[str, Any]:
        """The serializable fields (what a resumed run needs); the Python-only seams are left out."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _PYTHON_ONLY}
        if self.chat_model is not None:
            # not serializable: a resumed run must be given the model again
            data["chat_model_class"] = type(self.chat_model).__name__
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], **overrides: Any) -> Context:
        """A Context from `to_json` output; unknown keys are ignored so old run directories still load."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
