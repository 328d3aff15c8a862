"""`load`, `atomic.add`, `segment.add` and `rowdiv`: declared effects, type rules, exact CPU semantics, and
how atomics meet the interpreter's race detector."""

from __future__ import annotations

import numpy as np
import pytest

from cake_core.ir.primitive import Access, AttrSpec, Kind, Signature, Slot
from cake_core.primitives.reduce import AtomicAdd
from cake_core.semantics import run_program

# ---------------------------------------------------------------------------------------------------
# atomic.add / segment.add on one CTA
# ---------------------------------------------------------------------------------------------------

SCATTER = """
kernel scatter(v: global f32[R0, C], ix: global i32[R0], dst: global f32[K, C], cnt: global i32[K])
  domain R0 >= 1, K >= 1, C in {4}
  const R = 64
  grid (t) over (cdiv(R0, R))
  cta warps 2
  role all warps 0..2:
    reg vr: f32[R, C] layout rows
    reg ir: i32[R] layout rows
    reg one: i32[R] layout rows
    load vr <- v[t * R : +R, :], oob=zero
    load ir <- ix[t * R : +R], oob=fill, value=-1
    fill one, value=1
    OP dst[:, :] <- vr, ir, oob=skip
    OP cnt[:] <- one, ir, oob=skip
"""


def _scatter_inputs(rows: int, k: int, seed: int, sort: bool = False) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ix = rng.integers(0, k, size=rows).astype(np.int32)
    if sort:
        ix = np.sort(ix)
    return {
        "v": rng.standard_normal((rows, 4)).astype(np.float32),
        "ix": ix,
        "dst": rng.standard_normal((k, 4)).astype(np.float32),
        "cnt": np.zeros(k, np.int32),
    }


@pytest.mark.parametrize("op", ["atomic.add", "segment.add"])
def test_scatter_adds_rows_in_order_in_fp32(compile_cake, op):
    checked = compile_cake(SCATTER.replace("OP", op))
    inputs = _scatter_inputs(150, 7, seed=1, sort=(op == "segment.add"))
    result = run_program(checked, inputs, {}, policy="sequential")
    assert result.ok and not result.stopped, [str(f) for f in result.findings]
    # rows past R0 = 150 (the last CTA's tail) read index -1 and are skipped
    assert np.array_equal(result.outputs["cnt"], np.bincount(inputs["ix"], minlength=7))
    want = inputs["dst"].copy()
    if op == "atomic.add":
        for t in range(3):  # CTAs in order, rows in order, each addition rounded to fp32
            sl = slice(t * 64, min(150, t * 64 + 64))
            np.add.at(want, inputs["ix"][sl], inputs["v"][sl])
        assert np.array_equal(result.outputs["dst"], want)  # bit for bit
    else:
        exact = inputs["dst"].astype(np.float64)
        np.add.at(exact, inputs["ix"], inputs["v"].astype(np.float64))
        assert np.allclose(result.outputs["dst"], exact, rtol=1e-5, atol=1e-5)


def test_segment_add_sums_each_run_once(compile_cake):
    # keys 2 2 2 2 0 0 into dst[2] = 2^24: the run of four ones sums to 4 first, then lands exactly;
    # added one row at a time, each 2^24 + 1 is a tie that rounds back to 2^24 (to even)
    v = np.zeros((6, 4), np.float32)
    v[:, 0] = [1.0, 1.0, 1.0, 1.0, 5.0, 6.0]
    dst = np.zeros((3, 4), np.float32)
    dst[2, 0] = 2.0**24
    inputs = {"v": v, "ix": np.array([2, 2, 2, 2, 0, 0], np.int32), "dst": dst, "cnt": np.zeros(3, np.int32)}
    segment = run_program(compile_cake(SCATTER.replace("OP", "segment.add")), inputs, {}).outputs
    atomic = run_program(compile_cake(SCATTER.replace("OP", "atomic.add")), inputs, {}).outputs
    assert segment["cnt"].tolist() == atomic["cnt"].tolist() == [2, 0, 4]
    assert segment["dst"][:, 0].tolist() == [11.0, 0.0, 2.0**24 + 4]
    assert atomic["dst"][:, 0].tolist() == [11.0, 0.0, 2.0**24]


def test_an_index_outside_an_unmasked_scatter_faults(compile_cake):
    text = SCATTER.replace("OP", "atomic.add").replace("cnt[:] <- one, ir, oob=skip", "cnt[:] <- one, ir")
    checked = compile_cake(text)
    result = run_program(checked, _scatter_inputs(150, 7, seed=2), {})
    assert result.stopped and result.codes == ["CS001"]
    (f,) = result.findings
    assert "holds the index -1, outside the 7 rows of `cnt`" in f.message and "oob=skip" in f.message
    inputs = _scatter_inputs(128, 7, seed=2)  # no tail: every index is in range, no fault
    assert run_program(checked, inputs, {}).ok


def test_a_scatter_into_an_unwritten_destination_is_an_uninitialized_read(compile_cake):
    checked = compile_cake(SCATTER.replace("OP", "atomic.add"))
    inputs = _scatter_inputs(64, 5, seed=3)
    del inputs["cnt"]  # an output nobody zeroed: atomics read what was there
    result = run_program(checked, inputs, {"K": 5})
    assert "CS002" in result.codes


def test_atomic_effects_are_declared():
    sig = AtomicAdd.signature
    dst, src, index = sig.outs[0], sig.ins[0], sig.ins[1]
    assert dst.atomic and dst.access is Access.READWRITE and dst.kinds == {Kind.GLOBAL, Kind.SHARED}
    assert dst.mask_attr == "oob" and not src.atomic and not index.atomic
    assert Slot("s", {Kind.GLOBAL}).atomic is False  # the default: existing slots are unchanged


def test_effects_of_an_operation_say_atomic(compile_cake):
    checked = compile_cake(SCATTER.replace("OP", "atomic.add"))
    model = next(iter(checked.models.values()))
    typed = next(t for t in model.ops if t.prim.name == "atomic.add")
    effects = {e.operand.slot.name: e for e in typed.prim.effects(typed)}
    assert effects["dst"].atomic and effects["dst"].tier is Kind.GLOBAL and effects["dst"].masked
    assert effects["dst"].access is Access.READWRITE
    assert not effects["src"].atomic and effects["src"].tier is Kind.REGISTERS


# ---------------------------------------------------------------------------------------------------
# atomics and races
# ---------------------------------------------------------------------------------------------------

TWO = """
kernel two(ix: global i32[N], cnt: global i32[K])
  domain N >= 1, K >= 1
  const R = 32
  grid (t) over (1)
  cta warps 2
  role all warps 0..2 per 1:
    reg ir: i32[R] layout rows
    reg one: i32[R] layout rows
    reg back: i32[R] layout rows
    load ir <- ix[self * R : +R], oob=fill, value=-1
    fill one, value=1
    BODY
"""


class PlainAdd(AtomicAdd):
    """`atomic.add` without the atomic flag: the same semantics, declared as a plain read-modify-write."""

    name = "test.plain_add"
    signature = Signature(
        outs=[Slot("dst", {Kind.GLOBAL, Kind.SHARED}, Access.READWRITE, mask_attr="oob")],
        ins=[Slot("src", {Kind.REGISTERS}), Slot("index", {Kind.REGISTERS})],
        attrs=[AttrSpec("oob", "word", choices=("skip", "none"))],
    )


def _two(compile_cake, body: str, policy: str = "random"):
    checked = compile_cake(TWO.replace("BODY", body.replace("\n", "\n    ")), extra={PlainAdd.name: PlainAdd()})
    rng = np.random.default_rng(5)
    inputs = {"ix": rng.integers(0, 6, size=64).astype(np.int32), "cnt": np.zeros(6, np.int32)}
    return inputs, run_program(checked, inputs, {}, policy=policy)


@pytest.mark.parametrize("policy", ["random", "sequential"])
def test_atomics_of_two_role_instances_do_not_race(compile_cake, policy):
    inputs, result = _two(compile_cake, "atomic.add cnt[:] <- one, ir, oob=skip", policy)
    assert result.ok, [str(f) for f in result.findings]
    assert np.array_equal(result.outputs["cnt"], np.bincount(inputs["ix"], minlength=6))


def test_the_same_scatter_without_the_atomic_flag_races(compile_cake):
    _, result = _two(compile_cake, "test.plain_add cnt[:] <- one, ir, oob=skip")
    assert result.codes == ["CS003"]


def test_a_plain_store_races_with_an_atomic(compile_cake):
    body = "if self == 0:\n  atomic.add cnt[:] <- one, ir, oob=skip\nelse:\n  store cnt[0 : +4] <- one[0 : +4]"
    _, result = _two(compile_cake, body)
    assert result.codes == ["CS003"]


def test_reading_atomic_results_needs_a_barrier(compile_cake):
    _, racy = _two(compile_cake, "atomic.add cnt[:] <- one, ir, oob=skip\nload back[0 : +6] <- cnt[0 : +6]")
    assert racy.codes == ["CS003"] and "load" in racy.findings[0].message
    body = "atomic.add cnt[:] <- one, ir, oob=skip\nbar.sync\nload back[0 : +6] <- cnt[0 : +6]"
    _, ordered = _two(compile_cake, body)
    assert ordered.ok, [str(f) for f in ordered.findings]


# ---------------------------------------------------------------------------------------------------
# load and rowdiv
# ---------------------------------------------------------------------------------------------------

DIV = """
kernel div(s: global f32[K, C], n: global i32[K], old: global bf16[K, C], out: global f32[K, C], ld: global f32[K, C])
  domain K >= 1, C in {8}
  const R = 32
  grid (t) over (cdiv(K, R))
  cta warps 1
  role all warps 0..1:
    reg cv: f32[R, C] layout rows
    reg lv: f32[R, C] layout rows
    rowdiv cv <- s[t * R : +R, :], n[t * R : +R], FALLBACK oob=zero
    store out[t * R : +R, :] <- cv, oob=skip
    load lv <- old[t * R : +R, :], oob=fill, value=7.5
    store ld[t * R : +R, :] <- lv, oob=skip
"""


@pytest.mark.parametrize("fallback", [True, False])
def test_rowdiv_divides_in_fp32_and_falls_back_on_empty_rows(compile_cake, fallback):
    text = DIV.replace("FALLBACK", "old[t * R : +R, :]," if fallback else "")
    checked = compile_cake(text)
    rng = np.random.default_rng(7)
    k = 40
    n = rng.integers(0, 4, size=k).astype(np.int32)
    s = rng.standard_normal((k, 8)).astype(np.float32)
    old = rng.standard_normal((k, 8)).astype(np.float32)
    result = run_program(checked, {"s": s, "n": n, "old": old}, {})
    assert result.ok, [str(f) for f in result.findings]
    old_bf16 = result.outputs["ld"]  # `load` converts bf16 to f32 exactly
    assert np.abs(old_bf16 - old).max() < 0.01
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.where(n[:, None] != 0, s / n[:, None].astype(np.float32), old_bf16 if fallback else 0.0)
    assert np.array_equal(result.outputs["out"], want.astype(np.float32))


def test_load_fill_value_and_zero(compile_cake):
    text = """
kernel ld(a: global i32[N], o1: global i32[N2], o2: global i32[N2])
  domain N >= 1, N2 >= 1
  grid (t) over (1)
  cta warps 1
  role all warps 0..1:
    reg f: i32[8] layout rows
    reg z: i32[8] layout rows
    load f <- a[0 : +8], oob=fill, value=-1
    load z <- a[0 : +8], oob=zero
    store o1[0 : +8] <- f
    store o2[0 : +8] <- z
"""
    checked = compile_cake(text)
    out = run_program(checked, {"a": np.arange(1, 6, dtype=np.int32)}, {"N2": 8}).outputs
    assert out["o1"].tolist() == [1, 2, 3, 4, 5, -1, -1, -1]
    assert out["o2"].tolist() == [1, 2, 3, 4, 5, 0, 0, 0]


# ---------------------------------------------------------------------------------------------------
# type rules, lowering, cost
# ---------------------------------------------------------------------------------------------------

TYPES = """
kernel k(v: global f32[R0, C], h: global bf16[K, C], ix: global i32[R0], dst: global f32[K, C])
  domain R0 >= 1, K >= 1, C in {4}
  grid (t) over (1)
  cta warps 1
  role all warps 0..1:
    reg vr: f32[32, 4] layout rows
    reg v3: f32[32, 3] layout rows
    reg ir: i32[32] layout rows
    reg fr: f32[32] layout rows
    reg ir16: i32[16] layout rows
    LINE
"""


@pytest.mark.parametrize(
    "line,message",
    [
        ("atomic.add h[:, :] <- vr, ir", "a destination of f32, f64, i32 or u32"),
        ("atomic.add dst[:, :] <- vr, fr", "integer row indices"),
        ("atomic.add dst[:, :] <- v3, ir", "adds rows of [32, 3] into rows of [?, 4]"),
        ("atomic.add dst[:, :] <- vr, ir16", "holds 16 indices for the 32 rows"),
        ("atomic.add dst[:, 0] <- vr, ir", "adds rows of [32, 4] into rows of [?]"),
        ("atomic.add dst[:, :] <- vr, ir, oob=zero", "is one of skip, none"),
        ("segment.add dst[:, :] <- vr, fr", "integer row indices"),
        ("load vr <- ix[0 : +32]", "between float types or between integer types"),
        ("load ir <- ix[0 : +32], value=-1", "needs `oob=fill`"),
        ("load vr <- v[0 : +16, :]", "shapes differ"),
        ("rowdiv ir <- v[0 : +32, :], ix[0 : +32]", "an f32 result"),
        ("rowdiv vr <- v[0 : +32, :], ix[0 : +16]", "holds 16 divisors for 32 rows"),
    ],
)
def test_type_rules(check, line, message):
    checked = check(TYPES.replace("LINE", line))
    assert not checked.ok
    assert any(message in d.message for d in checked.diagnostics), [d.message for d in checked.diagnostics]


@pytest.mark.parametrize(
    "line", ["atomic.add dst[:, :] <- vr, ir, oob=skip", "segment.add dst[:, :] <- vr, ir", "load vr <- v[0 : +32, :]",
             "rowdiv vr <- v[0 : +32, :], ix[0 : +32], h[0 : +32, :], oob=zero"],
)  # fmt: skip
def test_well_typed_lines_check_clean(check, line):
    checked = check(TYPES.replace("LINE", line))
    assert checked.ok, [d.message for d in checked.diagnostics]
    model = next(iter(checked.models.values()))
    (typed,) = model.ops
    ctx = type("Ctx", (), {"const": lambda self, e: None, "spec": {}, "target": None})()
    terms = typed.prim.cost(typed, ctx)
    assert terms.flops > 0 or terms.global_bytes > 0
    if typed.prim.name in ("atomic.add", "segment.add"):
        assert terms.global_bytes == 2 * 32 * 4 * 4 and terms.flops == 32 * 4
