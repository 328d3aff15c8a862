"""Domain clauses that relate two run-time sizes (``KP >= K``, ``N % K == 0``): read from the kernel,
and satisfied by every assignment the witness search and the protocol samples use.

The property tests draw random ranges and relations and check :meth:`ShapeDomain.complete`: what it
returns satisfies every clause, keeps the sizes no relation moves, and leaves an assignment that
already satisfies the domain as it is.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cake_core.ir import nodes as n
from cake_core.ir.exprs import evaluate
from cake_core.verify import protocol as P
from cake_core.verify.analyses import Analyses
from cake_core.verify.shapes import Relation, ShapeDomain, SizeRange
from cake_core.verify.witness import WitnessSearch

from .conftest import models

KERNEL = """\
kernel k(x: global f32[K], y: global f32[KP], out: global f32[N])
  domain K >= 1, KP % 4 == 0, KP >= K, N >= 1, N <= 2 * K, N % K == 0
  grid (t) over (cdiv(KP, 128))
  cta warps 4
  smem buf: f32[2][128]
  barrier full: mbarrier[2] count 1
  role all warps 0..4:
    reg v: f32[128] layout rows
    for i in 0 .. cdiv(K, 64):
      mbarrier.arrive full[i % 2]
      mbarrier.wait full[i % 2], parity=(i / 2) % 2
    store out[t * 128 : +128] <- v
"""


def _holds(d: ShapeDomain, sizes: dict[str, int]) -> bool:
    env = {**d.env, **sizes}
    for r in d.sizes.values():
        if not r.admits(sizes[r.name]):
            return False
    for rel in d.relations:
        v, bound = sizes[rel.var], evaluate(rel.value, env)
        if not (v >= bound if rel.op == ">=" else v <= bound if rel.op == "<=" else bound > 0 and v % bound == 0):
            return False
    return True


def test_relations_are_read_from_the_domain(only_targets) -> None:
    (model,) = models(KERNEL)
    d = ShapeDomain.of(model)
    assert [r.describe() for r in d.relations] == ["KP >= K", "N <= 2 * K", "N % K == 0"]
    assert (d.sizes["KP"].lo, d.sizes["KP"].modulus) == (0, 4)  # the range keeps what holds alone
    assert d.describe() == "K >= 1; KP >= 0, KP % 4 == 0; N >= 1; KP >= K; N <= 2 * K; N % K == 0"


def test_witness_assignments_satisfy_the_relations(only_targets) -> None:
    (model,) = models(KERNEL)
    d = ShapeDomain.of(model)
    search = WitnessSearch(model, d, Analyses(()))
    names = ["K", "KP", "N"]
    seen = list(search.size_assignments(names))
    assert len(seen) > 100
    assert all(_holds(d, dict(zip(names, a, strict=True))) for a in seen)
    assert any(k > 100 for k, _, _ in seen)  # K still takes large values, its relatives follow it


def test_protocol_samples_satisfy_the_relations(only_targets) -> None:
    (model,) = models(KERNEL)
    d = ShapeDomain.of(model)
    runs = P.protocol(model).runs
    assert len(runs) == 2
    for run in runs:
        assert _holds(d, dict(run.sample.sizes)), run.sample


SIZES = ("A", "B", "C")


@st.composite
def domains(draw) -> ShapeDomain:
    sizes = {}
    for s in SIZES:
        mod = draw(st.sampled_from([1, 1, 2, 4, 8]))
        lo = draw(st.integers(0, 20)) // mod * mod
        hi = draw(st.one_of(st.none(), st.integers(lo, lo + 200)))
        sizes[s] = SizeRange(s, lo, None if hi is None else hi // mod * mod, mod)
    relations = []
    for _ in range(draw(st.integers(0, 3))):
        var, other = draw(st.permutations(SIZES))[:2]
        op = draw(st.sampled_from([">=", "<=", "%"]))
        value: n.Expr = n.Name(other)
        if op != "%" and draw(st.booleans()):
            value = n.Bin("*", n.Num(draw(st.integers(1, 4))), value)
        relations.append(Relation(var, op, value))
    return ShapeDomain(sizes, frozenset(), tuple(relations))


@settings(max_examples=300, deadline=None)
@given(domains(), st.data())
def test_completed_assignments_satisfy_every_clause(d: ShapeDomain, data) -> None:
    values = {}
    for s in data.draw(st.lists(st.sampled_from(SIZES), unique=True)):
        r = d.sizes[s]
        if r.hi is None or r.hi >= r.lo:
            values[s] = data.draw(st.sampled_from(d.samples(s, [3, 64])))
    full = d.complete(values)
    if full is None:
        return  # no admissible completion was found: the assignment is dropped, never quoted
    assert _holds(d, full)
    moved = {rel.var for rel in d.relations}
    assert all(full[s] == v for s, v in values.items() if s not in moved)
    assert d.complete(full) == full  # an admissible assignment stays as it is
