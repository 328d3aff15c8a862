"""Mutation operators make exactly the edits they claim, and known-bad mutants are caught.

A small sample of the pipeline of ``bench/mutation_report.py``: the operators on a two-stage TMA
pipeline written for these tests, then a few mutants of the Hopper schedule judged end to end (type
check, verifier, interpreter on one small shape).
"""

from __future__ import annotations

import difflib
import functools

import pytest

from cake_core.ir import nodes as n
from cake_core.ir.parser import parse
from cake_core.ir.printer import print_module
from cake_core.mutate import OPERATORS, Mutant, mutants, operator
from cake_core.mutate.coverage_operators import COVERAGE_OPERATORS
from cake_core.mutate.pipeline import Fate, Judge, summarize
from cake_core.mutate.rewrite import blocks, replace, replace_block
from cake_core.mutate.subjects import ProblemExerciser, Subject
from cake_core.problems.kmeans_assign import KMEANS_ASSIGN
from loaded import prims, registry

PIPE = """\
kernel pipe(x: global bf16[N, 64], out: global f32[N])
  domain N >= 1
  const R = 64, S = 2
  grid (t) over (cdiv(N, R))
  cta warps 8
  smem xs: bf16[S][R, 64] swizzle 128B
  barrier full: mbarrier[S] count 1
  barrier empty: mbarrier[S] count 128
  role producer warps 0..4:
    for i in 0 .. 4:
      mbarrier.wait empty[i % S], parity=(i / S + 1) % 2
      mbarrier.arrive.expect_tx full[i % S], bytes=R * 64 * 2
      tma.load xs[i % S] <- x[t * R : +R, :], full[i % S]
  role consumer warps 4..8:
    reg s: f32[R] layout rows
    for i in 0 .. 4:
      mbarrier.wait full[i % S], parity=i / S % 2
      fence.proxy_async
      sumsq s <- xs[i % S]
      mbarrier.arrive empty[i % S]
    store out[t * R : +R] <- s, oob=skip
"""




def _edits(m: Mutant, base: n.Module) -> list[str]:
    """The changed lines of the printed mutant, as ``-old`` / ``+new``."""
    a, b = print_module(base).splitlines(), print_module(m.module).splitlines()
    diff = difflib.unified_diff(a, b, lineterm="", n=0)
    return [line for line in diff if line[:1] in "-+" and line[:3] not in ("---", "+++")]


def _of(name: str) -> list[Mutant]:
    return list(operator(name).mutants(parse(PIPE, "pipe.cake"), prims()))


# -- the operators' edits -----------------------------------------------------------------------------


def test_every_operator_has_sites_in_the_pipeline() -> None:
    """The explicit pipeline is a site of every operator but the pipe classes (it has no `pipe`; those
    are tested on the Hopper schedules in test_pipe_operators.py, the coverage classes in
    test_coverage_operators.py), `dropped-limit` (it has no reduction; test_dataflow_operators.py) and
    `dropped-instance-sync` (it has no `bar.sync`; test_threads_operators.py)."""
    base = parse(PIPE, "pipe.cake")
    found = {m.operator for m in mutants(base, prims())}
    coverage = {op.name for op in COVERAGE_OPERATORS}
    expected = {op.name for op in OPERATORS if not op.name.startswith("pipe-")} - {"dropped-limit", "dropped-instance-sync"}
    assert found - coverage == expected - coverage


def test_stage_index_variants() -> None:
    base = parse(PIPE, "pipe.cake")
    ms = [m for m in _of("stage-index") if m.loc.line == 13 and m.subject == "xs"]
    assert [m.variant for m in ms] == ["+1", "-1", "+1 wrapped", "-1 wrapped"]
    assert _edits(ms[0], base) == [
        "-      tma.load xs[i % S] <- x[t * R : +R, :], full[i % S]",
        "+      tma.load xs[i % S + 1] <- x[t * R : +R, :], full[i % S]",
    ]
    assert _edits(ms[3], base)[1] == "+      tma.load xs[(i % S + (S - 1)) % S] <- x[t * R : +R, :], full[i % S]"
    # every ring operand is a site: 3 in the producer, 4 in the consumer, 4 variants each
    assert len(_of("stage-index")) == 4 * 7


def test_parity_flip_expect_tx_and_counts() -> None:
    base = parse(PIPE, "pipe.cake")
    flips = _of("parity-flip")
    assert [m.loc.line for m in flips] == [11, 17]
    assert _edits(flips[1], base)[1] == "+      mbarrier.wait full[i % S], parity=(i / S % 2 + 1) % 2"
    tx = _of("expect-tx")
    assert [_edits(m, base)[1] for m in tx] == [
        "+      mbarrier.arrive.expect_tx full[i % S], bytes=R * 64 * 2 + 16",
        "+      mbarrier.arrive.expect_tx full[i % S], bytes=R * 64 * 2 - 16",
    ]
    counts = _of("arrival-count")
    assert [_edits(m, base)[1] for m in counts] == [
        "+  barrier full: mbarrier[S] count 2", "+  barrier full: mbarrier[S] count 0",
        "+  barrier empty: mbarrier[S] count 129", "+  barrier empty: mbarrier[S] count 127",
    ]  # fmt: skip
    stages = _of("stage-count")
    assert [m.description for m in stages][:2] == [
        "shared buffer `xs` stages `S` -> `S + 1`", "shared buffer `xs` stages `S` -> `S - 1`",
    ]
    assert _edits(stages[0], base)[1] == "+  smem xs: bf16[S + 1][R, 64] swizzle 128B"


def test_drops_and_swaps() -> None:
    base = parse(PIPE, "pipe.cake")
    (fence,) = _of("dropped-fence")
    assert _edits(fence, base) == ["-      fence.proxy_async"]
    (mask,) = _of("dropped-mask")
    assert _edits(mask, base)[1] == "+    store out[t * R : +R] <- s"
    swaps = _of("wait-arrive-swap")
    # producer: the wait and the next arrive; consumer: the wait and its arrive (an arrive with no later
    # wait in its block makes no pair)
    assert [(m.loc.line, m.variant) for m in swaps] == [(11, "swap"), (17, "swap")]
    lines = print_module(swaps[0].module).splitlines()
    at = lines.index("  role producer warps 0..4:") + 2
    assert lines[at : at + 2] == [
        "      mbarrier.arrive.expect_tx full[i % S], bytes=R * 64 * 2",
        "      mbarrier.wait empty[i % S], parity=(i / S + 1) % 2",
    ]
    lines = print_module(swaps[1].module).splitlines()
    at = lines.index("  role consumer warps 4..8:") + 3
    assert lines[at : at + 4] == [
        "      mbarrier.arrive empty[i % S]",
        "      fence.proxy_async",
        "      sumsq s <- xs[i % S]",
        "      mbarrier.wait full[i % S], parity=i / S % 2",
    ]


def test_mutants_leave_the_original_alone_and_type_check() -> None:
    base = parse(PIPE, "pipe.cake")
    text = print_module(base)
    from cake_core.ir.sema import check_module

    for m in mutants(base, prims()):
        assert print_module(base) == text
        assert m.module != base
        again = parse(print_module(m.module), "m.cake")
        assert again == m.module
        if m.operator in ("parity-flip", "expect-tx", "dropped-fence", "dropped-mask", "wait-arrive-swap"):
            assert check_module(again, prims()).ok, m.description


def test_rewrite_replaces_one_occurrence_by_identity() -> None:
    base = parse(PIPE, "pipe.cake")
    k = base.kernels[0]
    first_s = k.consts[1].value  # `2` of `S = 2`
    changed = replace(base, first_s, n.Num(3))
    assert changed.kernels[0].consts[1].value == n.Num(3)
    assert changed.kernels[0].consts[0] is k.consts[0]  # untouched parts are shared
    with pytest.raises(LookupError):
        replace(base, n.Num(2), n.Num(3))  # equal, but not a node of the tree
    block = next(b for b in blocks(k) if b.owner is k.roles[1])
    dropped = replace_block(base, block, block.body[1:])
    assert [type(s).__name__ for s in dropped.kernels[0].roles[1].body] == ["For", "Op"]


# -- the pipeline on a sample of real mutants ----------------------------------------------------------

SMALL = ((({"B": 1, "N": 600, "K": 300, "D": 64}), "bf16", 1),)


@functools.cache
def _hopper() -> tuple[Judge, Subject]:
    from pathlib import Path

    from cake_core.problems import kmeans_assign

    path = Path(kmeans_assign.__file__).parent / "schedules" / "explicit" / "hopper.cake"
    subject = Subject.load("hopper.cake", path.read_text(), prims(), KMEANS_ASSIGN)
    subject.exerciser = ProblemExerciser(KMEANS_ASSIGN, shapes=SMALL, extra=())
    return Judge(registry()), subject


def _pick(description: str) -> Mutant:
    judge, subject = _hopper()
    for m in mutants(subject.module, judge.primitives):
        if m.description == description:
            return m
    raise AssertionError(f"no mutant {description!r}")


@pytest.mark.parametrize(
    "description",
    [
        "barrier `cempty` count `128 * WG` -> `128 * WG + 1`",
        "`mbarrier.arrive.expect_tx cfull[s]` bytes `BN * D * 2 + BN * 4` -> `BN * D * 2 + BN * 4 - 16`",
        "shared buffer `cs` stages `S` -> `S - 1`",
        "`sumsq s` mask `oob=zero` dropped",
    ],
)
def test_known_bad_mutants_are_caught(description: str) -> None:
    judge, subject = _hopper()
    outcome = judge.judge(subject, _pick(description))
    assert outcome.fate in (Fate.VERIFIER, Fate.INTERPRETER), outcome


def test_an_unused_added_stage_is_equivalent() -> None:
    judge, subject = _hopper()
    outcome = judge.judge(subject, _pick("barrier `cfull` stages `S` -> `S + 1`"))
    assert outcome.fate is Fate.EQUIVALENT and "never used" in outcome.detail


def test_summaries_count_per_class() -> None:
    judge, subject = _hopper()
    picked = [_pick("barrier `cfull` stages `S` -> `S + 1`"), _pick("shared buffer `cs` stages `S` -> `S - 1`")]
    outcomes = [judge.judge(subject, m) for m in picked]
    (s,) = [x for x in summarize(outcomes, ["stage-count"]) if x.operator == "stage-count"]
    assert (s.mutants, s.typechecked, s.equivalent, s.verifier + s.interpreter) == (2, 2, 1, 1)
    assert s.caught_share == 1.0


def test_a_ring_slot_mixup_the_verifier_misses_is_caught_by_the_interpreter() -> None:
    judge, subject = _hopper()
    outcome = judge.judge(subject, _pick("`mbarrier.wait` stage `cempty[s]` -> `cempty[(s + 1) % S]` (+1 wrapped)"))
    assert outcome.fate is Fate.INTERPRETER, outcome
    assert outcome.detail.startswith("CS004"), outcome.detail  # the producer waits on the wrong slot: deadlock
