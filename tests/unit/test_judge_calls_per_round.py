"""How many calls each side makes in a timing round (hardware.judge.timing.calls_per_round)."""

from kernelwright.hardware.judge.timing import calls_per_round


def test_each_side_fills_its_share_of_a_round_at_its_own_time_per_call():
    # published/09 on an H200: the candidate's kernels 0.23 ms, eager 8 ms; 100 ms over 10 rounds
    assert calls_per_round(100.0, 0.23) == 43
    assert calls_per_round(100.0, 8.0) == 1
    # a call slower than a round's share still runs once; a tiny one at most 200 times
    assert calls_per_round(100.0, 50.0) == 1
    assert calls_per_round(100.0, 0.001) == 200
    assert calls_per_round(100.0, 0.0) == 200  # an estimate of zero is clamped, not divided by
