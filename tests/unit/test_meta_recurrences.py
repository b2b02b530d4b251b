"""A recurrence on the meta device runs its first time step only (tasks/analysis.py,
meta_recurrences_by_one_step): level3/38's bidirectional LSTM took 50 s to load (a dozen meta forwards of
92,000 dispatched ops each) and the judge's 60 s limit killed it beside other jobs. The shortcut must give
what the whole loop gives: output shapes, the ops seen, and the FLOPs of every step."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from kernelwright.tasks.analysis import _OpRecorder, meta_recurrences_by_one_step, trace_forward


class _Counting(TorchDispatchMode):
    n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.n += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.nn.LSTM(6, 8, num_layers=2, batch_first=True, bidirectional=True),
        lambda: torch.nn.LSTM(6, 8, num_layers=2, proj_size=4),
        lambda: torch.nn.GRU(6, 8, num_layers=3, bidirectional=True),
        lambda: torch.nn.RNN(6, 8, batch_first=True),
    ],
)
def test_one_step_on_meta_gives_the_whole_sequences_shapes_ops_and_flops(make) -> None:
    torch.manual_seed(0)
    rnn = make().to("meta")
    x = torch.randn(3, 7, 6, device="meta")  # 7 steps when batch_first, else 3 steps of batch 7
    recorder = _OpRecorder()
    with torch.no_grad(), FlopCounterMode(display=False) as whole, recorder:
        expected = rnn(x)  # torch's own loop over every step
    with _Counting() as counted:
        traced = trace_forward(rnn, [x])
    with _Counting() as looped, torch.no_grad():
        rnn(x)
    assert counted.n < looped.n / 2  # the shortcut ran: not every step dispatched
    assert traced.flops == whole.get_total_flops() > 0
    assert traced.ops == recorder.ops
    flat = lambda o: [o] if isinstance(o, torch.Tensor) else [t for p in o for t in flat(p)]  # noqa: E731
    assert [t.shape for t in flat(traced.output)] == [t.shape for t in flat(expected)]


def test_real_tensors_run_the_whole_loop_and_the_patch_is_undone() -> None:
    rnn = torch.nn.GRU(4, 5)
    x = torch.randn(6, 2, 4)
    forward = torch.nn.GRU.forward
    with meta_recurrences_by_one_step():
        assert torch.nn.GRU.forward is not forward
        out, h = rnn(x)
    assert torch.nn.GRU.forward is forward
    torch.testing.assert_close(out, rnn(x)[0])
