"""The recorder's memory check (hardware/judge/evidence.Recorder): whatever a recorded op or launch reads, and
whatever forward returns, must hold what the recorder last saw there; the thread-state counter the
candidate process uses to see threads that ended (hardware/candidate/guard); and the job's input seeds
(hardware/judge/inputs)."""

from __future__ import annotations

import threading
import types

import pytest
import torch
from torch.utils._python_dispatch import _pop_mode, _push_mode

from kernelwright.hardware.candidate.guard import thread_state_counter
from kernelwright.hardware.config import EvalConfig
from kernelwright.hardware.judge.evidence import Recorder, RecordingMode, analyse
from kernelwright.hardware.judge.inputs import draw_seeds


def recorded(before: list[torch.Tensor], forward, rec: Recorder | None = None) -> dict:
    """Run `forward` under a recorder as the candidate process does; the report the judge would read."""
    rec = rec or Recorder()
    rec.start(before)
    _push_mode(RecordingMode(rec))
    try:
        out = forward()
        rec.check([out], "returned by forward")
    finally:
        _pop_mode()
        rec.stop()
    return {"events": [list(e) for e in rec.events], "unseen": rec.unseen,
            "outputs": [out.untyped_storage().data_ptr()],
            "before": [t.untyped_storage().data_ptr() for t in before]}  # fmt: skip


def test_a_buffer_written_out_of_sight_before_a_recorded_read_is_caught():
    x, buf = torch.randn(64), torch.zeros(64)

    def forward():
        buf.numpy()[:] = torch.relu(x).numpy()  # numpy: no torch op writes buf
        return buf.clone()

    report = recorded([x, buf], forward)
    assert report["unseen"] and report["unseen"][0][2] == "read by aten::clone", report["unseen"]
    prov = analyse(report)
    assert (prov.ok, prov.error_kind) == (False, "forbidden") and "no recorded op writing it" in prov.reason


def test_an_output_overwritten_after_its_last_recorded_write_is_caught():
    x = torch.randn(64)

    def forward():
        out = torch.zeros_like(x)
        out.numpy()[:] = 1.0
        return out

    report = recorded([x], forward)
    assert [u[2] for u in report["unseen"]] == ["returned by forward"]


def test_recorded_writes_in_place_and_fresh_are_not_unseen():
    x, buf = torch.randn(64), torch.zeros(64)

    def forward():
        buf.add_(x)  # an in-place write to storage that existed before forward
        y = buf * 2
        y.mul_(3)
        return y + buf

    assert recorded([x, buf], forward)["unseen"] == []


def test_a_thread_that_has_ended_is_still_counted():
    next_id = thread_state_counter()
    a, b = next_id(), next_id()
    assert b == a + 1  # nothing started in between
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
    assert next_id() > b + 1


def test_input_seeds_are_fresh_per_job_and_replayable():
    shapes = [types.SimpleNamespace(label="small"), types.SimpleNamespace(label="sliced")]
    cfg = EvalConfig(seed=0)
    a, b = draw_seeds(shapes, cfg), draw_seeds(shapes, cfg)  # type: ignore[arg-type]
    assert [len(a.trials["small"]), len(a.trials["sliced"])] == [3, 1]
    assert set(a.trials["small"]).isdisjoint(b.trials["small"]) and a.recheck != b.recheck
    assert not {0, 1, 2} & set(a.trials["small"])  # nothing derived from the configured seed
    replay = draw_seeds(shapes, EvalConfig(input_seeds=a.as_json()))  # type: ignore[arg-type]
    assert replay.as_json() == a.as_json()


@pytest.mark.parametrize("bad", [{"small": [1]}, {}])
def test_a_partial_replay_draws_the_rest_fresh(bad):
    shapes = [types.SimpleNamespace(label="small")]
    seeds = draw_seeds(shapes, EvalConfig(input_seeds=bad))  # type: ignore[arg-type]
    assert len(seeds.trials["small"]) == 3 and seeds.trials["small"][: len(bad.get("small", []))] == bad.get(
        "small", []
    )


def test_memory_freed_and_taken_by_an_unrecorded_tensor_is_not_a_change():
    """A temporary freed in forward, and its address taken by a tensor no recorded op made (torch.tensor
    of Python numbers): another storage, not an unseen write to the first."""
    x = torch.randn(64)

    def forward():
        for _ in range(50):
            tmp = x * 2  # recorded, fingerprinted, freed
            del tmp
            scale = torch.tensor([3.0] * 64)  # no recorded op writes it; may reuse the address
            y = x + scale
        return y

    assert recorded([x], forward)["unseen"] == []


def _stats_launch(rec: Recorder, part: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor) -> None:
    """A launch as the conv programs' statistics kernel makes it without running statistics to update: mean
    and rstd passed again for the unused pointers (and a view of mean's storage), written once each."""

    def kernel() -> None:
        mean.copy_(part.mean(dim=1))
        rstd.copy_(part.var(dim=1).add(1e-5).rsqrt())

    rec.wrap_launch("_kw_norm_stats", (part, mean, rstd, mean, rstd, mean[:1], 0.1), {}, kernel)


def test_a_launch_given_a_buffer_it_writes_more_than_once_is_not_an_unseen_write():
    x, rec = torch.randn(3, 8), Recorder()

    def forward():
        part = x * 2
        mean, rstd = torch.empty(3), torch.empty(3)
        _stats_launch(rec, part, mean, rstd)
        return mean * rstd  # read after the launch: what the launch wrote, not a change

    report = recorded([x], forward, rec)
    assert report["unseen"] == [], report["unseen"]
    launch = next(e for e in report["events"] if e[0] == "triton")
    assert len(launch[2]) == 3 and len(launch[3]) == 2  # part, mean, rstd read once each; mean, rstd written
    assert analyse(report).ok


def test_a_buffer_changed_out_of_sight_and_given_to_a_launch_twice_is_still_caught():
    x, rec = torch.randn(3, 8), Recorder()

    def forward():
        part = x * 2
        mean, rstd = torch.empty(3), torch.empty(3)
        part.numpy()[:] = 0.0  # numpy: no torch op writes part
        _stats_launch(rec, part, mean, rstd)
        rec.wrap_launch("_kw_twice", (part, part), {}, lambda: None)  # what it reads was seen: no report
        return mean * rstd

    report = recorded([x], forward, rec)
    assert [u[2] for u in report["unseen"]] == ["read by Triton kernel _kw_norm_stats"]
    assert report["unseen"][0][1] == report["events"][0][3][0]  # part's storage (x * 2 wrote it)
    prov = analyse(report)
    assert (prov.ok, prov.error_kind) == (False, "forbidden") and "no recorded op writing it" in prov.reason


def test_batch_norm_running_statistics_updated_by_torch_are_recorded_writes():
    """native_batch_norm updates running_mean/var in place though its schema does not mark them written:
    one BatchNorm used twice in a train-mode forward reads statistics the first use changed."""
    bn = torch.nn.BatchNorm1d(8).train()
    x = torch.randn(16, 8)
    report = recorded([x, bn.weight, bn.bias, bn.running_mean, bn.running_var], lambda: bn(bn(x)))
    assert report["unseen"] == [], report["unseen"]


def test_a_fingerprint_is_keyed_and_weighs_every_position():
    from kernelwright.hardware.judge.fingerprint import FingerprintKey, fingerprint

    x = torch.randn(3, 37)  # 444 bytes: whole words only; a 7-byte tensor below has a tail
    key = FingerprintKey()
    before = fingerprint(x, key)
    assert fingerprint(x, key) == before and fingerprint(x, FingerprintKey()) != before
    swapped = x.clone()
    swapped[0, 0], swapped[2, 5] = x[2, 5], x[0, 0]
    shifted = x.clone()
    shifted[0, 1] += 1.0
    shifted[1, 1] -= 1.0
    assert swapped.view(torch.int32).sum() == x.view(torch.int32).sum()  # what a plain sum sees: nothing
    assert fingerprint(swapped, key) != before and fingerprint(shifted, key) != before
    tail = torch.arange(7, dtype=torch.uint8)
    assert fingerprint(tail.flip(0).contiguous(), key) != fingerprint(tail, key)


def test_a_swap_made_out_of_sight_before_a_recorded_read_is_caught():
    x = torch.randn(64)

    def forward():
        a = x.numpy()
        a[[0, 9]] = a[[9, 0]]  # numpy: no torch op; every sum of x's memory is what it was
        out = x.clone()
        a[[0, 9]] = a[[9, 0]]
        return out

    report = recorded([x], forward)
    assert [u[2] for u in report["unseen"]] == ["read by aten::clone"], report["unseen"]


def _report(convolutions: int) -> dict:
    """A forward's record: `convolutions` convolutions through torch, a Triton kernel, then a cat."""
    events = [["aten", "convolution", [1], [10 + i]] for i in range(convolutions)]
    events += [["triton", "kernel", [10], [20]], ["aten", "cat", [20, *range(11, 10 + convolutions)], [30]]]
    return {"events": events, "unseen": [], "outputs": [30], "before": [1]}


def test_a_model_that_keeps_some_of_an_ops_calls_in_torch_is_not_a_fallback():
    """The reference's compute ops are counted: a whole model with one of its three convolutions in torch
    (the others in Triton) runs every op kind the reference runs, and is not the reference copied through a
    kernel; running each as many times as the reference is."""
    reference = {"convolution": 3, "cat": 1}
    assert analyse(_report(1), reference).ok
    fallback = analyse(_report(3), reference)
    assert (fallback.ok, fallback.error_kind) == (False, "torch_fallback"), fallback.reason
    assert "every compute op the reference runs" in fallback.reason


def test_a_launch_writing_what_kept_memory_held_already_is_recorded_as_writing_it():
    """Memory kept between calls out of the recorder's sight (a replay's arena, a cached workspace), into which
    a launch writes what the last call wrote (a weight's transform): the write counts, so the output that
    reads it is the kernels' work."""
    w, rec = torch.randn(8), Recorder()
    kept = w * 2  # an earlier call's result, in memory nothing reachable holds

    def forward():
        rec.wrap_launch("_kw_double", (w, kept), {}, lambda: kept.copy_(w * 2))
        out = torch.empty(8)
        rec.wrap_launch("_kw_add", (kept, w, out), {}, lambda: out.copy_(kept + w))
        return out

    report = recorded([w], forward, rec)
    assert [e[:2] for e in report["events"]] == [
        ["aten", "fill_"], ["triton", "_kw_double"], ["aten", "empty"], ["triton", "_kw_add"],
    ], report["events"]  # fmt: skip
    assert analyse(report).ok


def test_what_kept_memory_held_cannot_reach_an_output_through_a_launch_that_leaves_it():
    """The same memory holding an answer computed out of sight, given to a launch that copies it out and writes
    it back unchanged: the launch sees only what the recorder filled it with, never the answer."""
    x, rec = torch.randn(8), Recorder()
    answer = torch.relu(x)  # computed before the recorded call, held nowhere the recorder looks

    returned = []

    def forward():
        out = torch.empty(8)
        rec.wrap_launch("_kw_copy", (answer, out), {}, lambda: (out.copy_(answer), answer.copy_(answer)))
        returned.append(out)
        return out

    report = recorded([x], forward, rec)
    assert torch.isnan(returned[0]).all() and torch.isnan(answer).all()
    verdict = analyse(report)  # and what it read is still memory no recorded op wrote
    assert (verdict.ok, verdict.error_kind) == (
        False,
        "forbidden",
    ) and "no recorded op wrote" in verdict.reason
