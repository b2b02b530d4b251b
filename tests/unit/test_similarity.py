"""The task similarity experience is ranked by (tasks/similarity.py), and the offline writer's use of it:
a near case is started from before a faster far one, and only near cases' failures are avoided."""

from __future__ import annotations

import pytest

from kernelwright.providers.offline.choice.context import WriterContext, parse_cases
from kernelwright.providers.offline.choice.designs import kernel_info
from kernelwright.providers.offline.choice.policy import choose
from kernelwright.providers.offline.choice.schedule import schedule
from kernelwright.providers.offline.frontend.analysis import analyze_cached
from kernelwright.providers.protocol import parse_sections, render_section
from kernelwright.tasks import bundled_suite_dir, load_task
from kernelwright.tasks.similarity import (
    NEAR,
    parse_case_line,
    parse_signature_key,
    signature_similarity,
)
from kernelwright.tasks.task import TaskSignature


def sig(fams: str, shapes: list[list[int]], dtype: str = "float32", ops: str = "") -> TaskSignature:
    return TaskSignature(op_families=fams.split("+"), ops=ops.split(), input_shapes=shapes,
                         input_dtypes=[dtype] * len(shapes))  # fmt: skip


def test_the_measure_orders_what_a_design_transfers_across():
    base = sig("softmax", [[4096, 8192]])
    assert signature_similarity(base, base) == pytest.approx(1.0)
    scales = [signature_similarity(base, sig("softmax", [[4096, 8192 // f]])) for f in (2, 16, 256, 4096)]
    assert scales == sorted(scales, reverse=True) and scales[0] < 1.0
    assert scales[1] >= NEAR > scales[2]  # 16x apart is near, 256x is not
    other_dtype = signature_similarity(base, sig("softmax", [[4096, 8192]], "bfloat16"))
    assert other_dtype >= NEAR
    other_family = signature_similarity(base, sig("norm", [[4096, 8192]]))
    assert other_family < NEAR and other_family < scales[2]
    # symmetric; and what neither side knows does not count against them
    other = sig("softmax+pointwise", [[64, 512], [512]], ops="aten._softmax aten.add")
    assert signature_similarity(base, other) == pytest.approx(signature_similarity(other, base))
    assert signature_similarity(TaskSignature(), base) == 0.0
    assert signature_similarity(sig("norm", []), sig("norm", [])) == pytest.approx(1.0)


def test_signatures_read_back_from_the_prompt_and_from_case_lines():
    task = load_task(bundled_suite_dir("level1") / "09_softmax.py")
    key = task.signature.key()
    back = parse_signature_key(key)
    assert back is not None and back.key() == key
    prompt = render_section("task", task.source, name=task.name, signature=key)
    assert parse_signature_key(parse_sections(prompt)["task"].attrs["signature"]) == back
    line = parse_case_line("task: 12_rms (norm+pointwise; in 16x64x256;64; float32)\naction: large_step")
    assert line == TaskSignature(op_families=["norm", "pointwise"], input_shapes=[[16, 64, 256], [64]],
                                 input_dtypes=["float32"])  # fmt: skip
    with_ops = parse_case_line(
        "task: 12_rms (norm; in 16x64; float32)\nops: aten.mul.Tensor aten.rsqrt.default"
    )
    assert with_ops is not None and with_ops.ops == ["aten.mul.Tensor", "aten.rsqrt.default"]
    # only the line right after the task line names its ops (not one further down, e.g. in code)
    later = parse_case_line("task: 12_rms (norm; in 16x64; float32)\naction: x\nops: aten.mul.Tensor")
    assert later is not None and later.ops == []
    assert parse_signature_key("no signature here") is None and parse_case_line("task: x") is None


def _case(outcome: str, speedup: str, shapes: str, design: str, config: str, fams: str = "reduction") -> str:
    return (
        f'<case outcome="{outcome}" speedup="{speedup}" same_hardware="true">\n'
        f"task: t ({fams}; in {shapes}; float32)\n"
        f"design: kernelwright: family=reduction design={design} config={config}\n</case>"
    )


def _sum_info():
    task = load_task(bundled_suite_dir("level1") / "05_sum_last_dim.py")
    analysed = analyze_cached(task.source, task.name)
    sched = schedule(analysed.graph)
    k = next(k for k in sched.triton_kernels() if k.family == "reduction")
    return task, kernel_info(sched, k)


def test_the_writer_starts_from_the_nearest_case_not_the_fastest():
    task, info = _sum_info()
    shapes = ";".join("x".join(map(str, s)) for s in task.signature.input_shapes)
    tiny = ";".join("x".join(str(max(1, d // 64)) for d in s) for s in task.signature.input_shapes)
    cases = parse_cases(
        _case("effective", "3.00", tiny, "split", "BLOCK_R=1024,WAVES=2,num_warps=4")
        + _case("effective", "1.40", shapes, "looped", "BLOCK_R=512,num_warps=8")
    )
    near = choose(WriterContext(cases=cases, signature=task.signature), info, primary=True)
    assert near.design.name == "looped" and near.config["BLOCK_R"] == 512, near.why
    assert "similarity 1.00" in near.why
    # without the task's signature (a prompt that does not carry it) the fastest case wins, as before
    assert choose(WriterContext(cases=cases), info, primary=True).design.name == "split"


def test_only_failures_on_near_tasks_are_avoided():
    task, info = _sum_info()
    first = choose(WriterContext(signature=task.signature), info, primary=True)
    cfg = ",".join(f"{k}={v}" for k, v in first.config.items())
    shapes = ";".join("x".join(map(str, s)) for s in task.signature.input_shapes)
    far_shapes = ";".join("x".join(str(max(1, d // 256)) for d in s) for s in task.signature.input_shapes)
    far = parse_cases(_case("failed", "n/a", far_shapes, first.design.name, cfg))
    near = parse_cases(_case("failed", "n/a", shapes, first.design.name, cfg))
    lost = parse_cases(_case("ineffective", "0.95", shapes, first.design.name, cfg))
    assert (
        choose(WriterContext(cases=far, signature=task.signature), info, primary=True).config == first.config
    )
    for cases in (near, lost):
        again = choose(WriterContext(cases=cases, signature=task.signature), info, primary=True)
        assert (again.design.name, again.config) != (first.design.name, first.config)


def test_a_speed_seen_on_another_target_does_not_steer_the_writer():
    task, info = _sum_info()
    shapes = ";".join("x".join(map(str, s)) for s in task.signature.input_shapes)
    here = _case("effective", "1.40", shapes, "looped", "BLOCK_R=512,num_warps=8")
    there = here.replace('same_hardware="true"', 'same_hardware="false"')
    ctx = WriterContext(cases=parse_cases(here), signature=task.signature)
    assert choose(ctx, info, primary=True).design.name == "looped"
    plain = choose(WriterContext(signature=task.signature), info, primary=True)
    other = choose(WriterContext(cases=parse_cases(there), signature=task.signature), info, primary=True)
    assert (other.design.name, other.config) == (plain.design.name, plain.config)


def test_a_loss_on_a_less_similar_task_does_not_override_a_win_on_this_one():
    task, info = _sum_info()
    shapes = ";".join("x".join(map(str, s)) for s in task.signature.input_shapes)
    half = [[max(1, d // 2) for d in s] for s in task.signature.input_shapes]
    other = TaskSignature(op_families=task.signature.op_families, ops=task.signature.ops,
                          input_shapes=half, input_dtypes=task.signature.input_dtypes)  # fmt: skip
    assert NEAR <= signature_similarity(task.signature, other) < 1.0  # near, but not this task
    half_shapes = ";".join("x".join(map(str, s)) for s in half)
    won = _case("effective", "1.40", shapes, "looped", "BLOCK_R=512,num_warps=8")
    lost_nearby = _case("ineffective", "0.97", half_shapes, "looped", "BLOCK_R=512,num_warps=8")
    got = choose(
        WriterContext(cases=parse_cases(won + lost_nearby), signature=task.signature), info, primary=True
    )
    assert (got.design.name, got.config["BLOCK_R"], got.config["num_warps"]) == ("looped", 512, 8), got.why
    # A failure of that config on this very task does move it (a kernel that is only sometimes right)...
    failed_here = _case("failed", "n/a", shapes, "looped", "BLOCK_R=512,num_warps=8")
    moved = choose(
        WriterContext(cases=parse_cases(won + failed_here), signature=task.signature), info, primary=True
    )
    # ...a slower re-run of it does not: its win stands (the fastest kernel known for the task).
    rerun_here = _case("ineffective", "0.97", shapes, "looped", "BLOCK_R=512,num_warps=8")
    kept = choose(
        WriterContext(cases=parse_cases(won + rerun_here), signature=task.signature), info, primary=True
    )
    assert kept.config == got.config, kept.why
    assert moved.design.name != "looped" or moved.config != got.config, moved.why


def test_a_task_s_own_case_ranks_before_a_faster_one_of_other_ops_at_the_same_sizes():
    # Case lines name the ops (an "ops:" line), so a logsumexp at the same sizes is near but not equal.
    task, info = _sum_info()
    shapes = ";".join("x".join(map(str, s)) for s in task.signature.input_shapes)

    def case(speedup: str, config: str, ops: str) -> str:
        return _case("effective", speedup, shapes, "looped", config).replace(
            "float32)\n", f"float32)\nops: {ops}\n"
        )

    own = case("1.05", "BLOCK_R=512,num_warps=8", " ".join(task.signature.ops))
    other = case("3.00", "BLOCK_R=256,num_warps=4", "aten.logsumexp.default")
    cases = parse_cases(other + own)
    assert cases[1].signature is not None and cases[1].signature.ops == task.signature.ops
    got = choose(WriterContext(cases=cases, signature=task.signature), info, primary=True)
    assert (got.config["BLOCK_R"], got.config["num_warps"]) == (512, 8), got.why


def test_the_writer_starts_from_a_root_as_fast_as_the_reference_and_compares_whole_configs():
    task, info = _sum_info()
    shapes = ";".join("x".join(map(str, s)) for s in task.signature.input_shapes)
    # A root at 1.00x is labelled "ineffective" (it did not beat its parent, the reference): still the
    # fastest kernel known for the task, so a warm run starts from it rather than from a neighbour.
    root = _case("ineffective", "1.00", shapes, "looped", "BLOCK_R=512,num_warps=8,EVICT=1")
    got = choose(WriterContext(cases=parse_cases(root), signature=task.signature), info, primary=True)
    assert (got.design.name, got.config["BLOCK_R"], got.config["EVICT"]) == ("looped", 512, 1), got.why
    slower = _case("ineffective", "0.90", shapes, "looped", "BLOCK_R=512,num_warps=8,EVICT=1")
    plain = choose(WriterContext(signature=task.signature), info, primary=True)
    again = choose(WriterContext(cases=parse_cases(slower), signature=task.signature), info, primary=True)
    assert (again.design.name, again.config) == (plain.design.name, plain.config)  # slower: not a start
    # A clear loss of a config naming another knob (STATIC) is another kernel, not the winner's: a knob a
    # header leaves out is at its default, so the two differ and the win is started from unchanged.
    won = _case("effective", "2.48", shapes, "looped", "BLOCK_R=512,num_warps=8,EVICT=1")
    lost = _case("negative", "1.20", shapes, "looped", "BLOCK_R=512,num_warps=8,STATIC=1")
    got = choose(WriterContext(cases=parse_cases(won + lost), signature=task.signature), info, primary=True)
    assert (got.config["BLOCK_R"], got.config["num_warps"], got.config["EVICT"]) == (512, 8, 1), got.why


def test_a_step_that_lost_to_its_parent_is_not_started_from():
    # A small step at 1.51x that lost to its 1.82x parent (step ratio 0.83) is "ineffective" like a first
    # kernel at 1.00x, but it is not the best kernel its task had: the writer starts from the win instead.
    task, info = _sum_info()
    plain = choose(WriterContext(signature=task.signature), info, primary=True)
    shapes = ";".join("x".join(map(str, s)) for s in task.signature.input_shapes)
    lost = _case("ineffective", "1.51", shapes, "looped", "BLOCK_R=256,num_warps=4").replace(
        "</case>", "step ratio vs parent: 0.83\n</case>"
    )
    won = _case("effective", "1.82", shapes, "looped", "BLOCK_R=512,num_warps=8")
    cases = parse_cases(lost + won)
    assert cases[0].step_ratio == pytest.approx(0.83) and cases[0].parent_speedup == pytest.approx(1.82, 0.01)
    got = choose(WriterContext(cases=cases, signature=task.signature), info, primary=True)
    assert (got.config["BLOCK_R"], got.config["num_warps"]) == (512, 8), got.why
    # a first kernel at 1.00x (its ratio to the reference) still is a start; a step that tied a parent at
    # 1.00x is not, though the two read alike by their numbers
    first = _case("tie", "1.00", shapes, "looped", "BLOCK_R=256,num_warps=4").replace(
        "</case>", "step ratio vs the reference: 1.00\n</case>"
    )
    got = choose(WriterContext(cases=parse_cases(first), signature=task.signature), info, primary=True)
    assert (got.design.name, got.config["BLOCK_R"]) == ("looped", 256), got.why
    tied = first.replace("vs the reference", "vs parent")
    assert parse_cases(tied)[0].first_kernel is False and parse_cases(first)[0].first_kernel is True
    got = choose(WriterContext(cases=parse_cases(tied), signature=task.signature), info, primary=True)
    assert (got.design.name, got.config) == (plain.design.name, plain.config), got.why
    # without a step ratio line the parent's speedup is guessed from the numbers, as before
    unsaid = _case("ineffective", "1.00", shapes, "looped", "BLOCK_R=256,num_warps=4")
    got = choose(WriterContext(cases=parse_cases(unsaid), signature=task.signature), info, primary=True)
    assert got.config["BLOCK_R"] == 256, got.why


def test_a_design_that_won_for_other_ops_does_not_replace_the_default():
    # level1/22 (logsumexp over the middle dim) once started from looped because looped won on a mean at
    # the same sizes (similarity 0.85): 0.28 ms where its default, online, takes 0.15 on an H200.
    task = load_task(bundled_suite_dir("level1") / "22_logsumexp_middle_dim.py")
    analysed = analyze_cached(task.source, task.name)
    k = next(k for k in schedule(analysed.graph).triton_kernels() if k.family == "reduction")
    info = kernel_info(schedule(analysed.graph), k)
    plain = choose(WriterContext(signature=task.signature), info, primary=True)
    assert plain.design.name == "online"
    shapes = ";".join("x".join(map(str, s)) for s in task.signature.input_shapes)

    def case(ops: str) -> str:
        return _case("effective", "1.31", shapes, "looped", "BLOCK_R=64,BLOCK_I=32,num_warps=8").replace(
            "float32)\n", f"float32)\nops: {ops}\n"
        )

    mean = choose(WriterContext(cases=parse_cases(case("mean")), signature=task.signature), info, True)
    assert mean.design.name == "online", mean.why
    same = choose(WriterContext(cases=parse_cases(case("logsumexp")), signature=task.signature), info, True)
    assert (same.design.name, same.config["BLOCK_I"]) == ("looped", 32), same.why


def test_a_case_shown_in_a_prompt_names_its_ops_and_they_read_back():
    from kernelwright.memory.records import Case
    from kernelwright.nodes.prompts import case_text

    signature = sig("reduction", [[128, 4096, 256]], ops="aten.mean.dim aten.add.Tensor")
    case = Case(task_name="06_mean", signature=signature, action="large_step", correct=True, code="pass")
    text = case_text(case, code_chars=100, cross=False)
    lines = text.splitlines()
    assert (
        lines[0].startswith("task: 06_mean (reduction;") and lines[1] == "ops: aten.mean.dim aten.add.Tensor"
    )
    back = parse_case_line(text)
    assert back is not None and back.ops == signature.ops
    assert signature_similarity(back, signature) == pytest.approx(1.0)
    # a case of other ops at the same sizes is near, not equal
    other = parse_case_line(
        case_text(
            case.model_copy(
                update={"signature": sig("reduction", [[128, 4096, 256]], ops="aten.logsumexp.default")}
            ),
            code_chars=100,
            cross=False,
        )
    )
    assert other is not None and NEAR <= signature_similarity(other, signature) < 1.0


def test_a_case_says_whether_its_step_ratio_is_to_the_reference_and_it_reads_back():
    from kernelwright.memory.records import Case
    from kernelwright.nodes.prompts import case_text

    signature = sig("reduction", [[128, 4096, 256]])
    header = "# kernelwright: family=reduction design=looped config=BLOCK_R=64,num_warps=8"
    first = Case.from_attempt(signature=signature, code=header + "\npass", correct=True, speedup=1.004)
    child = Case.from_attempt(signature=signature, code=header + "\npass", correct=True, speedup=1.01,
                              parent=first)  # fmt: skip
    shown = [f'<case outcome="{c.outcome}" speedup="{c.speedup}">{case_text(c, 100, False)}</case>'
             for c in (first, child)]  # fmt: skip
    assert "step ratio vs the reference: 1.00" in shown[0] and "step ratio vs parent: 1.01" in shown[1]
    back = parse_cases("".join(shown))
    assert [c.first_kernel for c in back] == [True, False] and [c.outcome for c in back] == ["tie", "tie"]
    assert back[0].parent_speedup == 1.0 and back[1].parent_speedup == pytest.approx(1.0, abs=0.02)


def test_a_case_does_not_carry_over_knobs_that_follow_from_its_own_sizes():
    """A split's write grid (WRITE_CHUNKS) is set from the task's row count: a task started from another
    task's split takes the case's tuning (BLOCK_R, warps) but keeps its own write grid."""
    import dataclasses

    task, info = _sum_info()
    many_rows = dataclasses.replace(info, NK=7168, NR=1 << 18, split_ok=True, sm_count=132)
    shapes = ";".join("x".join(map(str, s)) for s in task.signature.input_shapes)
    cases = parse_cases(
        _case("effective", "2.00", shapes, "split", "BLOCK_R=1024,WAVES=8,num_warps=4,WRITE_CHUNKS=1")
    )
    picked = choose(WriterContext(cases=cases, signature=task.signature), many_rows, primary=True)
    assert picked.design.name == "split", picked.why
    assert (
        picked.config["BLOCK_R"] == 1024 and picked.config["WAVES"] == 8 and picked.config["num_warps"] == 4
    )
    assert picked.config.get("WRITE_CHUNKS", 0) == 0, picked.config


def test_a_short_k_products_gluon_schedule_is_not_advice_for_a_long_k_one():
    """Hopper's Gluon GEMM starts a short-K product ping-pong (WS=5) and a long-K one cooperative (WS=3,
    WS_COOP=1), each measured slower in the other's place: a case of the bf16 bmm (K = 1024) that won with
    ping-pong starts the 8192^3 bf16 GEMM from its tuning with the GEMM's own schedule, and the bmm keeps
    ping-pong when started from a long-K case that ran cooperative."""
    from kernelwright.providers.offline.choice.designs import config_space, find_design

    def matmul(stem: str):
        task = load_task(bundled_suite_dir("level1_bf16") / f"{stem}.py")
        sched = schedule(analyze_cached(task.source, task.name).graph)
        return task, kernel_info(sched, next(k for k in sched.triton_kernels() if k.family == "matmul"))

    def case(task, config: str) -> str:
        shapes = ";".join("x".join(map(str, s)) for s in task.signature.input_shapes)
        return (
            f'<case outcome="effective" speedup="1.05" same_hardware="true">\n'
            f"task: t (matmul; in {shapes}; bfloat16)\n"
            f"design: kernelwright: family=matmul design=persistent config={config}\n</case>"
        )

    base = "BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=4,num_warps=4,num_stages=3,TMA=1,FLAT=1,PER_SM=2"
    bmm_task, bmm = matmul("16_bmm")
    square_task, square = matmul("14_matmul_square")
    assert 5 in config_space(find_design("matmul", "persistent"), square)["WS"]  # a step the search may take
    picked = choose(WriterContext(cases=parse_cases(case(bmm_task, base + ",WS=5")), signature=square_task.signature),
                    square, primary=True)  # fmt: skip
    assert picked.config["GROUP_M"] == 4, (picked.why, picked.config)
    assert (picked.config["WS"], picked.config["WS_COOP"]) == (3, 1), (picked.why, picked.config)
    picked = choose(WriterContext(cases=parse_cases(case(square_task, base + ",WS=3,WS_COOP=1")),
                                  signature=bmm_task.signature), bmm, primary=True)  # fmt: skip
    assert picked.config["GROUP_M"] == 4 and picked.config["WS"] == 5, (picked.why, picked.config)
    assert picked.config.get("WS_COOP", 0) == 0, (picked.why, picked.config)
