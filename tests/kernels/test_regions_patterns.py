"""Models torch.fx cannot trace symbolically, split and stitched back: a buffer sliced to an input's size,
python control flow on sizes and devices, an attribute the forward reassigns, a submodule with
data-dependent control flow (kept whole, in torch), einops; each stitched with a Triton copy kernel in
every region that is a task, and run equal to the original (kernels under the Triton interpreter)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from kernelwright.hardware import WorkerPool
from kernelwright.tasks.region_runtime import fake_inputs, fake_run_node
from kernelwright.tasks.region_stitch import stitched_source
from kernelwright.tasks.regions import SplitError, split_model
from tests.fakes.writer import first_programs_stitched
from tests.kernels.tiny_model_src import copy_kernel


@pytest.fixture(autouse=True)
def _interpreted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")


HEADER = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"

SIZE_SLICING = (
    HEADER
    + """
class Model(nn.Module):
    def __init__(self, d, heads, longest):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.heads = heads
        self.register_buffer("mask", torch.tril(torch.ones(longest, longest)).view(1, 1, longest, longest))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


def get_inputs():
    return [torch.randn(2, 5, 6)]


def get_init_inputs():
    return [6, 2, 9]
"""
)

CONTROL_FLOW = (
    HEADER
    + """
class Model(nn.Module):
    def __init__(self, n, h):
        super().__init__()
        self.i2h = nn.Linear(n + h, h)
        self.h2o = nn.Linear(h, 3)
        self.w = nn.Parameter(torch.randn(h))

    def forward(self, x, h0):
        if x.device != self.w.device:
            raise ValueError("wrong device")
        steps, batch, _ = x.size()
        hidden, outs = h0, []
        for t in range(steps):
            hidden = torch.tanh(self.i2h(torch.cat((x[t], hidden), dim=1)))
            outs.append(self.h2o(hidden * self.w))
        return torch.stack(outs, dim=0)


def get_inputs():
    return [torch.randn(3, 2, 4), torch.randn(2, 5)]


def get_init_inputs():
    return [4, 5]
"""
)

REASSIGNED = (
    HEADER
    + """
class Model(nn.Module):
    def __init__(self, n, h):
        super().__init__()
        self.hidden = torch.randn(2, h)
        self.i2h = nn.Linear(n + h, h)
        self.h2o = nn.Linear(h, 3)

    def forward(self, x):
        self.hidden = self.hidden.to(x.device)
        self.hidden = torch.tanh(self.i2h(torch.cat((x, self.hidden), dim=1)))
        return self.h2o(self.hidden)


def get_inputs():
    return [torch.randn(2, 4)]


def get_init_inputs():
    return [4, 5]
"""
)

DATA_DEPENDENT = (
    HEADER
    + """
class Gate(nn.Module):
    def forward(self, x):
        if x.sum().item() > 0:  # on the data: no trace can follow it
            return x * 2.0
        return x - 1.0


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.rates = [r.item() for r in torch.linspace(0, 0.5, 3)]  # .item() while it is built
        self.fc1 = nn.Linear(n, n)
        self.gate = Gate()
        self.fc2 = nn.Linear(n, 2)

    def forward(self, x):
        if x.shape[0] > 1:
            x = F.relu(self.fc1(x))
        return self.fc2(self.gate(x) * self.rates[1])


def get_inputs():
    return [torch.randn(3, 4)]


def get_init_inputs():
    return [4]
"""
)

RECURRENCE = (
    HEADER
    + """
class Model(nn.Module):
    def __init__(self, n, h):
        super().__init__()
        self.hidden = torch.zeros(1, 2, h)
        self.lstm = nn.LSTM(n, h, batch_first=True)
        self.fc = nn.Linear(h, 3)

    def forward(self, x, h0=None, c0=None):
        if h0 is None:
            h0 = torch.zeros(1, x.size(0), self.lstm.hidden_size)
        if c0 is None:
            c0 = torch.zeros(1, x.size(0), self.lstm.hidden_size)
        self.hidden.copy_(h0)  # an in-place write whose value is not used
        out, _ = self.lstm(x, (h0, c0))
        return F.gelu(self.fc(out[:, -1, :]))


def get_inputs():
    return [torch.randn(2, 5, 4)]


def get_init_inputs():
    return [4, 3]
"""
)

EINOPS = (
    HEADER
    + """
from einops import rearrange


class Model(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        blocks = rearrange(x, "b (c l) h -> b c l h", l=self.block)
        y = torch.cumsum(self.fc(blocks), dim=2)
        return rearrange(y, "b c l h -> b (c l) h")


def get_inputs():
    return [torch.randn(2, 6, 3)]


def get_init_inputs():
    return [2]
"""
)


def _module(source: str, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), mod.__dict__)
    return mod


def _stitched(source: str) -> tuple[types.ModuleType, torch.nn.Module, torch.nn.Module, int]:
    """The original model, its stitched ModelNew (a copy kernel in every region that is a task, the
    original's weights loaded) and how many regions run a kernel."""
    task = _module(source, "task")
    torch.manual_seed(0)
    model = task.Model(*task.get_init_inputs())
    split = split_model(model, task.get_inputs())
    kernels = {r.index: (r.signature, copy_kernel(r.source)) for r in split.regions if r.source}
    stitched = _module(
        stitched_source(source, split.leaves, [r.plan() for r in split.regions], kernels, spec=split.spec),
        "stitched",
    )
    new = stitched.ModelNew(*task.get_init_inputs())
    new.load_state_dict(model.state_dict())
    return stitched, model, new, len(kernels)


def _stitched_text(source: str) -> str:
    task = _module(source, "task")
    split = split_model(task.Model(*task.get_init_inputs()), task.get_inputs())
    kernels = {r.index: (r.signature, copy_kernel(r.source)) for r in split.regions if r.source}
    return stitched_source(source, split.leaves, [r.plan() for r in split.regions], kernels, spec=split.spec)


def _calls(stitched: types.ModuleType) -> int:
    return sum(v[0] for k, v in vars(stitched).items() if k.endswith("CALLS"))


@pytest.mark.parametrize("source", [SIZE_SLICING, CONTROL_FLOW, DATA_DEPENDENT], ids=["size", "flow", "data"])
def test_specialized_models_split_into_regions_and_stitch_back_equal(source: str) -> None:
    task = _module(source, "task")
    split = split_model(task.Model(*task.get_init_inputs()), task.get_inputs())
    assert split.specialized
    assert sum(1 for r in split.regions if r.library) >= 2  # library operations in regions of their own
    assert not any("torch.device(" in r.source for r in split.regions)  # sizes are constants, devices not
    stitched, model, new, with_kernel = _stitched(source)
    assert with_kernel >= 2
    inputs = task.get_inputs()
    before = _calls(stitched)
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), model(*inputs), rtol=1e-5, atol=1e-5)
    assert _calls(stitched) - before >= 2  # the kernels ran


def test_a_loop_over_a_sequence_is_one_signature_per_kind_of_step() -> None:
    task = _module(CONTROL_FLOW, "task")
    split = split_model(task.Model(*task.get_init_inputs()), task.get_inputs())
    steps = [r for r in split.regions if r.library == "Linear"]
    assert len(steps) == 6  # i2h and h2o, three steps
    # x[t] is a view taken where it stands, so its index is in no region: the steps share signatures
    # (the last step's i2h region has one output fewer: its hidden state is not used again)
    assert steps[0].signature == steps[2].signature != steps[4].signature
    assert steps[1].signature == steps[3].signature == steps[5].signature
    assert len({r.signature for r in steps}) == 3
    assert not any(n.startswith("getitem") for r in steps for n in r.nodes)


def test_the_data_dependent_submodule_is_kept_whole_in_torch() -> None:
    task = _module(DATA_DEPENDENT, "task")
    split = split_model(task.Model(*task.get_init_inputs()), task.get_inputs())
    assert "gate" in split.leaves
    gate = next(r for r in split.regions if "Gate" in r.ops)
    assert not gate.source and "cannot be written back" in gate.why_not
    _, model, new, _ = _stitched(DATA_DEPENDENT)
    for x in (torch.randn(3, 4).abs(), -torch.randn(3, 4).abs()):  # both of its branches
        with torch.no_grad():
            torch.testing.assert_close(new(x), model(x), rtol=1e-5, atol=1e-5)


def test_a_specialized_model_at_other_sizes_runs_torch_where_a_region_differs() -> None:
    stitched, model, new, _ = _stitched(SIZE_SLICING)
    x = torch.randn(3, 7, 6)  # another batch and length: the views' sizes differ
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), rtol=1e-5, atol=1e-5)
    plan = next(p for key, p in new.__dict__["_kw_plans"].items() if key[0][0] == (3, 7, 6))
    assert not all(plan.matches) and any(plan.matches)  # only regions without a literal size kept kernels


def test_an_attribute_the_forward_reassigns_is_state_the_stitched_model_keeps() -> None:
    task = _module(REASSIGNED, "task")
    split = split_model(task.Model(*task.get_init_inputs()), task.get_inputs())
    assert list(split.graph._kw_writes) == ["hidden"]  # type: ignore[attr-defined]
    stitched, model, new, with_kernel = _stitched(REASSIGNED)
    assert with_kernel >= 2
    new.hidden = model.hidden.clone()
    before = _calls(stitched)
    with torch.no_grad():
        for _ in range(3):  # the hidden state carries from one call to the next
            x = torch.randn(2, 4)
            torch.testing.assert_close(new(x), model(x), rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(new.hidden, model.hidden, rtol=1e-5, atol=1e-5)
    assert _calls(stitched) - before >= 3
    assert not isinstance(model.hidden, torch.fx.Proxy)  # tracing left the model as it was


BUFFER_COUNTER = (
    HEADER
    + """
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.steps += 1
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(3, 8)]


def get_init_inputs():
    return [8]
"""
)


def test_a_buffer_the_forward_reassigns_is_put_back_and_kept_as_state() -> None:
    """`self.steps += 1` on a buffer: fx records an add and sets the buffer to its proxy; left there, the split's
    run of the graph read the proxy and grew the graph it walked, for ever."""
    task = _module(BUFFER_COUNTER, "task")
    model = task.Model(*task.get_init_inputs())
    split = split_model(model, task.get_inputs())
    assert list(split.graph._kw_writes) == ["steps"]  # type: ignore[attr-defined]
    assert type(model._buffers["steps"]) is torch.Tensor and int(model.steps) == 0  # as it was
    stitched, model, new, with_kernel = _stitched(BUFFER_COUNTER)
    assert with_kernel >= 1
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(3, 8)
            torch.testing.assert_close(new(x), model(x), rtol=1e-5, atol=1e-5)
    assert int(new.steps) == int(model.steps) == 3


def test_a_recurrence_and_an_in_place_write_are_kept_in_torch_and_the_rest_split() -> None:
    task = _module(RECURRENCE, "task")
    split = split_model(task.Model(*task.get_init_inputs()), task.get_inputs())
    lstm = next(r for r in split.regions if "LSTM" in r.ops)
    assert lstm.why_not.startswith("a recurrence") and not lstm.source
    copy = next(r for r in split.regions if "copy_" in r.ops)
    assert not copy.outputs and not copy.source  # nothing leaves it: no task to write (nor a `return (,)`)
    head = next(r for r in split.regions if "Linear" in r.ops)
    assert "LSTM" not in head.ops and head.source  # what follows the recurrence is a task of its own
    stitched, model, new, with_kernel = _stitched(RECURRENCE)
    x = torch.randn(2, 5, 4)
    before = _calls(stitched)
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), rtol=1e-5, atol=1e-5)
    assert _calls(stitched) - before == with_kernel >= 1


DROPOUT = (
    HEADER
    + """
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1 = nn.Linear(d, 2 * d)
        self.drop = nn.Dropout(0.25)
        self.fc2 = nn.Linear(2 * d, d)
        self.off = nn.Dropout(0.0)

    def forward(self, x):
        h = self.drop(torch.relu(self.fc1(x)))
        h = F.dropout(self.fc2(h), 0.5, self.training)
        return torch.tanh(self.off(h) * 2)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
"""
)


def test_a_random_dropout_runs_in_torch_between_regions_that_keep_their_kernels() -> None:
    task = _module(DROPOUT, "task")
    split = split_model(task.Model(*task.get_init_inputs()), task.get_inputs())
    assert [r.ops for r in split.regions] == [["Linear", "relu"], ["Dropout"], ["Linear"], ["dropout"],
                                              ["Dropout", "mul", "tanh"]]  # fmt: skip
    assert [bool(r.source) for r in split.regions] == [True, False, True, False, True]  # p = 0 joins
    assert all("random numbers in training mode" in split.regions[i].why_not for i in (1, 3))
    stitched, model, new, with_kernel = _stitched(DROPOUT)
    assert with_kernel == 3
    x = torch.randn(4, 8)
    for mode in ("train", "eval"):
        model.train(mode == "train")
        new.train(mode == "train")
        before = _calls(stitched)
        torch.manual_seed(1)
        expected = model(x)
        torch.manual_seed(1)
        torch.testing.assert_close(new(x), expected, rtol=1e-5, atol=1e-5)  # the same draws, in torch
        assert _calls(stitched) - before == 3


DEFAULTS = (
    HEADER
    + """
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x, scale: float = 2.0, shift=None, name="unused"):
        h = torch.relu(self.fc(x)) * scale
        return h if shift is None else h + shift


def get_inputs():
    return [torch.randn(3, 8)]


def get_init_inputs():
    return [8]
"""
)


def test_forward_arguments_left_at_their_defaults_are_constants_of_the_regions() -> None:
    task = _module(DEFAULTS, "task")
    split = split_model(task.Model(*task.get_init_inputs()), task.get_inputs())
    assert split.constant_args == {"scale": 2.0, "shift": None, "name": "unused"}
    (region,) = split.regions
    assert region.ops == ["Linear", "relu", "mul"] and region.inputs == ["x"]
    assert "mul(t1, 2.0)" in region.source  # the default, not an input the task cannot make
    stitched, model, new, with_kernel = _stitched(DEFAULTS)
    x = torch.randn(5, 8)
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), rtol=1e-5, atol=1e-5)
    assert _calls(stitched) == with_kernel == 1


def test_a_model_whose_own_forward_reads_its_data_is_refused_with_what_to_move() -> None:
    source = DEFAULTS.replace("return h if shift is None else h + shift", "return h if h.sum() > 0 else -h")
    task = _module(source, "task")
    with pytest.raises(SplitError, match=r"torch.fx cannot trace Model: .*move that part into a submodule"):
        split_model(task.Model(*task.get_init_inputs()), task.get_inputs())


SHARED_VIEW = (
    HEADER
    + """
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1 = nn.Linear(d, d)
        self.fc2 = nn.Linear(d, d)

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        h = torch.relu(self.fc1(flat))
        return self.fc2(h) + flat


def get_inputs():
    return [torch.randn(2, 3, 8)]


def get_init_inputs():
    return [8]
"""
)


def test_a_view_that_later_regions_read_too_runs_in_torch_before_its_region() -> None:
    """`flat = x.reshape(-1, D)` read by the first Linear and by the last add: inside the first Linear's
    region it would be an output computed from the region's input alone, which the judge refuses of any
    kernel (`torch_fallback`), so that region could never have one."""
    task = _module(SHARED_VIEW, "task")
    split = split_model(task.Model(*task.get_init_inputs()), task.get_inputs())
    assert [r.ops for r in split.regions] == [["Linear", "relu"], ["Linear", "add"]]
    assert [r.inputs for r in split.regions] == [["reshape"], ["relu", "reshape"]]
    stitched, model, new, with_kernel = _stitched(SHARED_VIEW)
    x = torch.randn(4, 5, 8)
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), rtol=1e-5, atol=1e-5)
    assert _calls(stitched) == with_kernel == 2


@pytest.mark.slow  # ~7 s; a dict-returning candidate stays judged in tests/kernels/test_dict_subclass_outputs.py
def test_a_forward_that_returns_a_dict_is_stitched_and_judged_as_a_dict(
    tmp_path: Path, pool: WorkerPool
) -> None:
    """A dict result (string keys, as a model returning named outputs has): the stitched model returns the
    same keys, and the judge compares it key by key; a dict the candidate returns with a key missing is
    a shape mismatch that names the keys."""
    from kernelwright.hardware import EvalConfig
    from kernelwright.tasks import load_task

    source = DEFAULTS.replace(
        "return h if shift is None else h + shift", 'return {"scores": h.sum(dim=1), "hidden": h}'
    )
    stitched, model, new, with_kernel = _stitched(source)
    assert with_kernel >= 1
    x = torch.randn(3, 8)
    with torch.no_grad():
        got, want = new(x), model(x)
    assert type(got) is dict and list(got) == ["scores", "hidden"]
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=1e-5, atol=1e-5)
    (tmp_path / "model.py").write_text(source)
    task = load_task(tmp_path / "model.py")
    _, kernels, _, written = first_programs_stitched(source)
    assert kernels
    verdict = pool.evaluate(task, written, EvalConfig(device="cpu"))
    assert verdict.correct, verdict.error
    missing = written.replace("return plan.run(self, inputs)",
                                             'return {"hidden": plan.run(self, inputs)["hidden"]}')  # fmt: skip
    verdict = pool.evaluate(task, missing, EvalConfig(device="cpu"))
    assert not verdict.correct and verdict.error_kind == "shape_mismatch", verdict.error
    assert "got a dict with keys ['hidden'], expected ['hidden', 'scores']" in verdict.error


def test_a_forward_that_returns_a_dict_with_keys_other_than_strings_is_refused_before_any_search() -> None:
    source = DEFAULTS.replace("return h if shift is None else h + shift", "return {0: h}")
    task = _module(source, "task")
    with pytest.raises(
        SplitError, match=r"Model.forward returns a dict with keys other than strings: the judge compares"
    ):
        split_model(task.Model(*task.get_init_inputs()), task.get_inputs())


def test_einops_rearrange_is_one_operation_of_the_graph() -> None:
    pytest.importorskip("einops")
    task = _module(EINOPS, "task")
    split = split_model(task.Model(*task.get_init_inputs()), task.get_inputs())
    assert sum(op == "rearrange" for r in split.regions for op in r.ops) == 2
    assert any("einops.rearrange(" in r.source and "import einops" in r.source for r in split.regions)
    stitched, model, new, with_kernel = _stitched(EINOPS)
    assert with_kernel >= 1
    x = torch.randn(2, 6, 3)
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "source",
    [SIZE_SLICING, CONTROL_FLOW, REASSIGNED, DATA_DEPENDENT, RECURRENCE, EINOPS],
    ids=["size", "flow", "reassigned", "data", "recurrence", "einops"],
)
def test_the_stitched_file_passes_the_judges_source_check(source: str) -> None:
    """The region runtime is copied into every stitched file: nothing in it may be what the judge rejects
    (inspect, importlib, frames)."""
    if source is EINOPS:
        pytest.importorskip("einops")
    from kernelwright.hardware.judge.static_check import static_check

    report = static_check(_stitched_text(source))
    assert report.ok, report.error


@pytest.mark.parametrize("kind", [torch.nn.GRU, torch.nn.LSTM])
@pytest.mark.parametrize("batch_first", [True, False])
def test_fake_recurrence_sizes_are_the_real_ones(kind: type[torch.nn.RNNBase], batch_first: bool) -> None:
    rnn = kind(4, 3, num_layers=2, bidirectional=True, batch_first=batch_first)
    x = torch.randn(5, 7, 4)
    graph = torch.fx.symbolic_trace(torch.nn.Sequential(rnn)).graph
    node = next(n for n in graph.nodes if n.op == "call_module")
    root = torch.nn.Module()
    root.add_module(str(node.target), rnn)
    (fake,), mode = fake_inputs([x])
    with mode:
        got = fake_run_node(root, node, (fake,), {})
    real = rnn(x)
    flat = torch.utils._pytree.tree_leaves
    assert [tuple(t.shape) for t in flat(got)] == [tuple(t.shape) for t in flat(real)]


@pytest.mark.parametrize("name", ["SIZE_SLICING", "CONTROL_FLOW"])
def test_a_specialized_model_stitched_with_the_writers_programs_is_judged_correct(
    name: str, tmp_path: Path, pool: WorkerPool
) -> None:
    """The judge (CPU, both modes, its own shapes: the stitched model traces itself again there) on the
    model stitched with the offline writer's first program for each region signature."""
    from kernelwright.hardware import EvalConfig
    from kernelwright.tasks import load_task

    source = globals()[name]
    split, kernels, _, stitched = first_programs_stitched(source)
    assert split.specialized and len(kernels) >= 3
    (tmp_path / "model.py").write_text(source)
    verdict = pool.evaluate(load_task(tmp_path / "model.py"), stitched, EvalConfig(device="cpu"))
    assert verdict.correct, verdict.error


DENSE_BLOCK = (
    HEADER
    + """
class Model(nn.Module):
    def __init__(self, c0, growth, layers):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.Sequential(nn.BatchNorm2d(c0 + i * growth), nn.ReLU(), nn.Conv2d(c0 + i * growth, growth, 1))
            for i in range(layers)
        )

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            features.append(layer(torch.cat(features, 1)))
        return torch.cat(features, 1)


def get_inputs():
    return [torch.randn(2, 3, 4, 4)]


def get_init_inputs():
    return [3, 2, 10]
"""
)


def test_a_wide_concatenation_stands_alone_in_torch_and_its_readers_are_a_region_of_one_input() -> None:
    from kernelwright.tasks.regions import WIDE_CAT

    task = _module(DENSE_BLOCK, "task")
    split = split_model(task.Model(*task.get_init_inputs()), task.get_inputs())
    cats = [r for r in split.regions if r.ops[0] == "cat"]
    # the layers' inputs are concatenations of 1 .. 10 tensors, and the block's output one of 11
    widths = [len(r.inputs) for r in cats]
    assert [w for w in widths if w > WIDE_CAT] == [9, 10, 11]
    for r in cats:
        alone = len(r.inputs) > WIDE_CAT
        assert (r.ops == ["cat"]) == alone, (r.ops, len(r.inputs))
        assert bool(r.source) != alone
        if alone:
            assert f"concatenation of more than {WIDE_CAT} tensors" in r.why_not
    readers = [r for r in split.regions if r.ops[0] == "BatchNorm2d"]
    # the concatenations of 9 and 10 tensors: the one of 11 is the block's output
    assert len(readers) == 2 and all(len(r.inputs) == 1 and r.source for r in readers)
    stitched, model, new, with_kernel = _stitched(DENSE_BLOCK)
    assert with_kernel == 10  # every layer: 8 with their concatenation, 2 without
    x = torch.randn(2, 3, 4, 4)
    for mode in (True, False):
        model.train(mode)
        new.train(mode)
        torch.testing.assert_close(new(x), model(x), rtol=1e-5, atol=1e-5)
