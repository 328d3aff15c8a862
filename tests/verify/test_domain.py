"""Reasoning about run-time sizes: what is proved, what a witness shows, and that proofs are sound.

The last test generates kernels with random index expressions and checks every verdict against a
brute-force enumeration of small sizes and every variable value: a proof must never be wrong, and a
witness must really break the access.
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from cake_core.ir import nodes as n
from cake_core.ir.exprs import EvalError, evaluate
from cake_core.ir.primitive import Kind
from cake_core.verify.domain import KernelDomain
from cake_core.verify.verdicts import Obligation, Status
from cake_core.verify.witness import EVAL_BUDGET
from cake_core.verify.linear import Form
from cake_core.verify.shapes import ShapeDomain, SizeRange

from .conftest import models

HEADER = """\
kernel k(x: global f32[N, 64], out: global f32[N])
  domain {domain}
  const R = 128
  grid (t) over ({grid})
  cta warps 4
  smem ring: f32[3][128]
  role all warps 0..4:
    reg v: f32[R] layout rows
    reg one: f32[1] layout rows
"""


def verdicts(body: str, domain: str = "N >= 1", grid: str = "cdiv(N, R)", target: str = "h200") -> dict:
    """The verdict of every global and shared access, by operand text."""
    text = HEADER.format(domain=domain, grid=grid) + body
    out = {}
    for model in models(text, target):
        for av in KernelDomain(model).accesses():
            if av.operand.kind in (Kind.GLOBAL, Kind.SHARED):
                from cake_core.ir.printer import expr

                out[expr(av.operand.expr)] = av.verdict
    return out


def only(body: str, **kw) -> object:
    vs = verdicts(body, **kw)
    assert len(vs) == 1, vs
    return next(iter(vs.values()))


# -- proofs --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "domain", "grid"),
    [
        ("    store out[t * R : +R] <- v\n", "N >= 1, N % 128 == 0", "cdiv(N, R)"),
        ("    store out[t * R : +R] <- v\n", "N >= 128, N % 128 == 0", "N / R"),
        ("    if t * R + R <= N:\n      store out[t * R : +R] <- v\n", "N >= 1", "cdiv(N, R)"),
        ("    for k in 0 .. N:\n      store out[k : +1] <- one\n", "N >= 1", "1"),
        ("    for k in 0 .. N + 5:\n      if k < N:\n        store out[k : +1] <- one\n", "N >= 1", "1"),
        ("    for j in 0 .. N - t * R:\n      store out[t * R + j : +1] <- one\n", "N >= 1", "cdiv(N, R)"),
        ("    for j in 0 .. min(R, N - t * R):\n      store out[t * R + j : +1] <- one\n", "N >= 1", "cdiv(N, R)"),
        ("    for k in 0 .. N:\n      store out[k % 7 : +1] <- one\n", "N >= 1", "1"),
        ("    for k in 0 .. N:\n      store out[N - 1 - k : +1] <- one\n", "N >= 1", "1"),
        ("    for k in 0 .. N step 2:\n      store out[k / 2 : +1] <- one\n", "N >= 1", "1"),
        ("    for i in 0 .. N:\n      store ring[i % 3] <- v\n", "N >= 1", "1"),
        ("    for i in 0 .. N:\n      store ring[(i + 2) % 3][0 : +1] <- one\n", "N >= 1", "1"),
        ("    store out[N - 1 : +1] <- one\n", "N >= 1", "1"),
        ("    store out[49 : +1] <- one\n", "N >= 50, N <= 100", "1"),
        ("    for k in 0 .. 100 - N:\n      store out[k : +1] <- one\n", "N >= 50, N <= 100", "1"),
        ("    store out[64 : +64] <- one\n".replace("one", "v[0 : +64]"), "N >= 128", "1"),
    ],
)
def test_proved(body: str, domain: str, grid: str) -> None:
    v = only(body, domain=domain, grid=grid)
    assert v.status is Status.PROVED, v


def test_a_masked_access_is_not_examined() -> None:
    assert only("    store out[t * R : +R] <- v, oob=skip\n").status is Status.MASKED


# -- witnesses -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "domain", "grid", "sizes", "vars_", "what"),
    [
        ("    store out[t * R : +R] <- v\n", "N >= 1", "cdiv(N, R)", {"N": 1}, {"t": 0},
         "the slice covers 0..127, past the extent `N` = 1"),
        ("    store out[t * R : +R] <- v\n", "N >= 1, N % 64 == 0", "cdiv(N, R)", {"N": 64}, {"t": 0},
         "past the extent `N` = 64"),
        ("    for k in 0 .. N + 1:\n      store out[k : +1] <- one\n", "N >= 1", "1", {"N": 1}, {"k": 1},
         "the slice is at 1, past the extent `N` = 1"),
        ("    for k in 0 .. N:\n      store out[k - 1 : +1] <- one\n", "N >= 1", "1", {"N": 1}, {"k": 0},
         "starts at -1, below 0"),
        ("    for i in 0 .. N:\n      store ring[i % 4] <- v\n", "N >= 1", "1", {"N": 4}, {"i": 3},
         "stage `i % 4` is 3, but `ring` has 3 stages"),
        ("    store out[100 : +1] <- one\n", "N >= 50, N <= 100", "1", {"N": 50}, {},
         "the slice is at 100, past the extent `N` = 50"),
    ],
)
def test_violated(body: str, domain: str, grid: str, sizes: dict, vars_: dict, what: str) -> None:
    v = only(body, domain=domain, grid=grid)
    assert v.status is Status.VIOLATED and v.witness is not None
    assert dict(v.witness.sizes) == sizes
    assert dict(v.witness.vars) == vars_
    assert what in v.witness.what


def test_a_witness_names_only_what_the_access_depends_on() -> None:
    v = only("    for k in 0 .. 4:\n      for j in 0 .. N + 1:\n        store out[j : +1] <- one\n")
    assert v.witness is not None
    assert dict(v.witness.vars) == {"j": 1}  # not t, not k
    assert v.witness.describe() == "N=1 (at j=1)"


def test_what_cannot_be_proved_is_sampled() -> None:
    # in bounds ((N-1)^2 / N < N), but division by a run-time size has no bound the proof can use
    v = only("    for k in 0 .. N:\n      store out[k * k / N : +1] <- one\n", grid="1")
    assert v.status is Status.SAMPLED and v.samples > 10


def test_a_guard_on_a_product_proves_it() -> None:
    v = only("    for k in 0 .. N:\n      if k * k < N:\n        store out[k * k : +1] <- one\n", grid="1")
    assert v.status is Status.PROVED


def test_a_run_time_step_must_be_proved_positive() -> None:
    # `step N` is at least 1 for N >= 1: the loop variable stays below N
    assert only("    for k in 0 .. N step N:\n      store out[k : +1] <- one\n", grid="1").status is Status.PROVED
    # with N >= 0 the step may be 0 and nothing is known of `k`: the proof gives up (sampled)
    v = only("    for k in 0 .. N step N:\n      store out[k : +1] <- one\n", domain="N >= 0", grid="1")
    assert v.status is Status.SAMPLED


# -- divisibility --------------------------------------------------------------------------------------


def test_multiple_of_over_the_domain() -> None:
    text = HEADER.format(domain="N >= 1, N % 8 == 0", grid="1") + "    store out[0 : +1] <- one\n"
    (model,) = models(text)
    kd = KernelDomain(model)
    n_expr = n.Name("N")
    assert kd.multiple_of(None, n_expr, 2, 16, "pitch").status is Status.PROVED
    v = kd.multiple_of(None, n_expr, 2, 32, "pitch")
    assert v.status is Status.VIOLATED and v.witness is not None
    assert dict(v.witness.sizes) == {"N": 8} and v.witness.what == "pitch 16"


# -- the shape domain ----------------------------------------------------------------------------------


def test_shape_domain_from_clauses() -> None:
    text = HEADER.format(domain="N >= 3, N <= 1000, N % 8 == 0", grid="1") + "    store out[0 : +1] <- one\n"
    (model,) = models(text)
    r = ShapeDomain.of(model).sizes["N"]
    assert (r.lo, r.hi, r.modulus) == (8, 1000, 8)
    assert r.describe() == "N >= 8, N <= 1000, N % 8 == 0"


def test_form_minimum_over_the_domain() -> None:
    d = ShapeDomain({"N": SizeRange("N", 8, None, 8), "K": SizeRange("K", 1, 10)}, frozenset())
    assert d.min_of(Form.make(3, {"N": Fraction(2), "K": Fraction(-1)})) == 3 + 16 - 10
    assert d.min_of(Form.make(0, {"N": Fraction(-1)})) is None  # unbounded below
    assert d.always_multiple(Form.make(16, {"N": Fraction(2)}), 16)
    assert not d.always_multiple(Form.make(16, {"N": Fraction(1)}), 16)


def test_samples_respect_the_domain() -> None:
    r = SizeRange("N", 64, 4096, 64)
    d = ShapeDomain({"N": r}, frozenset())
    values = d.samples("N", [128, 3])
    assert values and all(r.admits(v) for v in values)
    assert {64, 128, 192, 4096} <= set(values)


# -- soundness against brute force ---------------------------------------------------------------------

LEAVES = ["t", "i", "N", "R", "1", "2", "3", "5", "8", "16"]


def _expr(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(LEAVES)
    kind = rng.random()
    a = _expr(rng, depth - 1)
    if kind < 0.45:
        return f"({a} {rng.choice('+-')} {_expr(rng, depth - 1)})"
    if kind < 0.6:
        return f"({a} * {rng.choice(['2', '3', '4', 'R'])})"
    if kind < 0.72:
        return f"({a} {rng.choice('/%')} {rng.choice(['2', '3', '8', 'R'])})"
    if kind < 0.8:
        return f"cdiv({a}, {rng.choice(['2', '4', 'R'])})"
    if kind < 0.92:
        return f"{rng.choice(['min', 'max'])}({a}, {_expr(rng, depth - 1)})"
    return f"({a} * {_expr(rng, 0)})"


def _case(rng: random.Random) -> tuple[str, str, str]:
    divisor = rng.choice(["", ", N % 4 == 0", ", N % 16 == 0"])
    domain = f"N >= {rng.choice([0, 1, 5])}{divisor}" + rng.choice(["", ", N <= 40"])
    grid = rng.choice(["cdiv(N, R)", "cdiv(N, 8)", "1", "2"])
    stop = rng.choice(["N", "N + 1", "4", "cdiv(N, 3)", "min(N, 6)", "t + 3"])
    size = rng.choice(["1", "1", "2"])
    start = _expr(rng, 3)
    guard = rng.choice(["", f"if {_expr(rng, 1)} < N:", f"if {start} + {size} <= N:"])
    body = f"    for i in 0 .. {stop}:\n"
    ind = "      "
    if guard:
        body += f"{ind}{guard}\n"
        ind += "  "
    body += f"{ind}store out[{start} : +{size}] <- v[0 : +{size}]\n"
    return body, domain, grid


def _brute(body: str, domain: str, grid: str) -> tuple[bool, set[int]]:
    """Whether some admissible N in 0..40 (R=8 here) and variable values go out of bounds; and which N."""
    text = HEADER.format(domain=domain, grid=grid).replace("const R = 128", "const R = 8") + body
    (model,) = models(text)
    kd = KernelDomain(model)
    (typed,) = [t for t in model.ops if t.op.name == "store"]
    dst = typed.outs[0]
    item = dst.index[0]
    assert isinstance(item, n.Span)
    shape = kd.shape.sizes["N"]
    bad: set[int] = set()
    chain = kd.scope(typed)
    for size_n in range(0, 41):
        if not shape.admits(size_n):
            continue

        def walk(i: int, env: dict) -> bool:
            if i == len(chain):
                a, k = evaluate(item.start, env), evaluate(item.size, env)
                return a < 0 or a + k > size_n
            b = chain[i]
            try:
                if b.kind.value == "let":
                    return walk(i + 1, {**env, b.name: evaluate(b.value, env)})
                if b.kind.value == "guard":
                    return walk(i + 1, env) if bool(evaluate(b.value, env)) != b.negate else False
                if b.kind.value == "self":
                    vals = range(b.count)
                elif b.kind.value == "grid":
                    vals = range(evaluate(b.stop, env))
                else:
                    vals = range(evaluate(b.start, env), evaluate(b.stop, env))
            except EvalError:
                return False
            return any(walk(i + 1, {**env, b.name: v}) for v in vals)

        if walk(0, {**model.env, "N": size_n}):
            bad.add(size_n)
    return bool(bad), bad


def test_verdicts_agree_with_brute_force() -> None:
    rng = random.Random(20261129)
    seen = {Status.PROVED: 0, Status.VIOLATED: 0, Status.SAMPLED: 0}
    missed: list[str] = []
    for _ in range(250):
        body, domain, grid = _case(rng)
        text = HEADER.format(domain=domain, grid=grid).replace("const R = 128", "const R = 8") + body
        try:
            (model,) = models(text)
        except AssertionError:
            continue  # the random kernel does not type-check (e.g. a negative slice size)
        kd = KernelDomain(model)
        (typed,) = [t for t in model.ops if t.op.name == "store"]
        effect = next(e for e in typed.prim.effects(typed) if e.operand.kind is Kind.GLOBAL)
        verdict = kd.access(typed, effect)
        seen[verdict.status] += 1
        broken, where = _brute(body, domain, grid)
        context = f"\n{domain}; grid {grid}\n{body}verdict {verdict}; brute force breaks it at N in {sorted(where)}"
        if verdict.status is Status.PROVED:
            assert not broken, "unsound proof" + context
        if verdict.status is Status.VIOLATED:
            assert verdict.witness is not None
            n_value = dict(verdict.witness.sizes).get("N")
            if n_value is not None and n_value <= 40:
                assert n_value in where, "a witness that does not break the access" + context
        if verdict.status is Status.SAMPLED and broken:
            missed.append(context)  # sampling promises nothing, but its samples should catch these
    # the generator exercises every outcome, and most accesses are decided
    assert seen[Status.PROVED] > 20 and seen[Status.VIOLATED] > 20, seen
    assert seen[Status.SAMPLED] < seen[Status.PROVED] + seen[Status.VIOLATED], seen
    assert not missed, "the witness search missed:" + "".join(missed)


# -- the witness search --------------------------------------------------------------------------------


def test_the_witness_search_spends_its_evaluation_budget_and_stops() -> None:
    # an obligation that never fails, checked at every point of a walk far longer than the budget
    text = HEADER.format(domain="N >= 1", grid="cdiv(N, R)") + (
        "    for i in 0 .. N:\n      for j in 0 .. N:\n        store out[0 : +1] <- one\n"
    )
    (model,) = models(text)
    kd = KernelDomain(model)
    (typed,) = [t for t in model.ops if t.op.name == "store"]
    checked: list[int] = []

    def check(env: dict) -> None:
        checked.append(1)
        return None

    ob = Obligation(None, (n.Name("N"),), check)
    v = kd.witnesses.search(kd.scope(typed), [(ob, [])])
    assert v.status is Status.SAMPLED and v.samples > 1
    assert len(checked) == EVAL_BUDGET


def test_the_witness_search_reports_the_first_failure_it_walks_to() -> None:
    text = HEADER.format(domain="N >= 1", grid="1") + "    for i in 0 .. N:\n      store out[0 : +1] <- one\n"
    (model,) = models(text)
    kd = KernelDomain(model)
    (typed,) = [t for t in model.ops if t.op.name == "store"]
    ob = Obligation(None, (n.Name("i"),), lambda env: "too far" if env["i"] >= 2 else None)
    v = kd.witnesses.search(kd.scope(typed), [(ob, [])])
    assert v.status is Status.VIOLATED and v.witness is not None
    assert dict(v.witness.vars) == {"i": 2} and dict(v.witness.sizes) == {"N": 3} and v.witness.what == "too far"
