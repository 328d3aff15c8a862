"""The external-primitive proof.

A package outside ``cake_core`` (``cake-example-plugin``), installed and found through its entry point,
registers a new primitive, ``scale.rows``. With no change to the core, a kernel using it parses, prints,
round-trips through JSON, hashes, type-checks, runs in the interpreter with the right numbers, lowers
and compiles with NVRTC (no GPU needed); and a core rule, CR108, flags a misuse of it — an unmasked
write past the end of ``dst`` — from the effects the primitive declares, knowing nothing else of it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import attrs
import cake_example_plugin
import numpy as np
import pytest
from cake_core import plugins
from cake_core.hostdata import decode, encode
from cake_core.ir import nodes as n
from cake_core.ir.exprs import try_int
from cake_core.ir.hashing import structural_hash
from cake_core.ir.parser import parse
from cake_core.ir.primitive import Access, Kind
from cake_core.ir.printer import print_module
from cake_core.ir.model import CheckedModule, KernelModel
from cake_core.ir.sema import check_module
from cake_core.ir.serialize import from_json, to_json
from cake_core import pipeline
from cake_core.lower.program import lower_program, program_specs
from cake_core.semantics import run_program
from cake_core.target import Target
from cake_core.verify.expectations import check_file
from cake_core.verify.runner import verify_source

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "cases"

KERNEL = """\
kernel scale(x: global f32[N, 64], out: global f32[N, 64])
  domain N >= 1
  const R = 32
  grid (t) over (cdiv(N, R))
  cta warps 2
  role all warps 0..2:
    scale.rows out[t * R : +R, :] <- x[t * R : +R, :], factor=3.0, oob=skip
"""
OP_LINE = 7  # the line of the `scale.rows` operation in KERNEL

# The same kernel with every name changed and the layout of the text changed: the same candidate.
RENAMED = """\
kernel   triple(a: global f32[M, 64], b: global f32[M, 64])
  domain M >= 1
  const TILE = 32
  grid (i) over (cdiv(M, TILE))
  cta warps 2
  role main warps 0..2:
    scale.rows   b[i * TILE : +TILE, :] <-   a[i * TILE : +TILE, :],  factor=3.0,  oob=skip
"""

# Through shared memory: a cp.async copy into a padded buffer, then `scale.rows` from the shared tile.
STAGED = """\
kernel staged(x: global T[N, 64], out: global T[N, 64])
  domain T in {f32, bf16}, N >= 1
  const R = 32
  grid (t) over (cdiv(N, R))
  cta warps 2
  smem xs: T[R, 64] pad 8
  role all warps 0..2:
    cp.async xs <- x[t * R : +R, :], oob=zero
    cp.async.commit
    cp.async.wait pending=0
    bar.sync
    scale.rows out[t * R : +R, :] <- xs, factor=0.5, oob=skip
"""


@pytest.fixture(scope="module")
def registry() -> plugins.Registry:
    """Everything installed, found through entry points (the example plugin and cake-rules-core among it)."""
    return plugins.load()


@pytest.fixture(scope="module")
def primitives(registry: plugins.Registry) -> dict:
    return {name: registry.get("primitives", name) for name in registry.names("primitives")}


def _check(text: str, primitives: dict, target: Target | None = None, file: str = "k.cake") -> CheckedModule:
    return check_module(parse(text, file), primitives, target)


# ---------------------------------------------------------------------------------------------------
# Outside the core
# ---------------------------------------------------------------------------------------------------


def test_the_primitive_comes_from_outside_the_core(registry: plugins.Registry) -> None:
    r = registry.registration("primitives", "scale.rows")
    assert (r.plugin.distribution, r.plugin.version, r.plugin.builtin) == ("cake-example-plugin", "0.3.1", False)
    assert type(r.obj).__module__ == "cake_example_plugin.primitive"
    # neither the core nor the rule pack mentions it anywhere: no change to the core was needed
    for package in (ROOT / "cake_core", ROOT / "plugins"):
        for path in package.rglob("*"):
            if path.suffix in (".py", ".toml", ".cake", ".md"):
                assert "scale.rows" not in path.read_text(encoding="utf-8", errors="replace"), path


# ---------------------------------------------------------------------------------------------------
# Text, JSON, hash
# ---------------------------------------------------------------------------------------------------


def test_it_parses_in_the_generic_form() -> None:
    module = parse(KERNEL, "k.cake")
    (op,) = [s for s in n.walk_stmts(module.kernels[0].roles[0].body) if isinstance(s, n.Op)]
    assert op.name == "scale.rows"
    assert [type(e).__name__ for e in op.outs + op.ins] == ["Ref", "Ref"]
    assert [a.key for a in op.attrs] == ["factor", "oob"]
    assert (op.loc.line, op.loc.col) == (OP_LINE, 5)


def test_it_prints_back_to_the_same_text() -> None:
    module = parse(KERNEL, "k.cake")
    assert print_module(module) == KERNEL
    assert print_module(parse(RENAMED, "r.cake")).splitlines()[-1] == (
        "    scale.rows b[i * TILE : +TILE, :] <- a[i * TILE : +TILE, :], factor=3.0, oob=skip"
    )


def test_it_round_trips_through_json() -> None:
    module = parse(KERNEL, "k.cake")
    text = to_json(module)
    assert from_json(text) == module
    assert '"scale.rows"' in text and json.loads(text)["format"] == 1


def test_its_hash_is_structural() -> None:
    h = structural_hash(parse(KERNEL, "k.cake"))
    assert structural_hash(parse(RENAMED, "r.cake")) == h
    assert structural_hash(parse(KERNEL.replace("factor=3.0", "factor=4.0"), "k.cake")) != h
    assert structural_hash(parse(KERNEL.replace(", oob=skip", ""), "k.cake")) != h
    without = KERNEL.replace(
        "    scale.rows out[t * R : +R, :] <- x[t * R : +R, :], factor=3.0, oob=skip\n",
        "    reg v: f32[R, 64] layout rows\n    fill v, value=3.0\n    store out[t * R : +R, :] <- v, oob=skip\n",
    )
    assert structural_hash(parse(without, "k.cake")) != h


def test_its_hash_is_stable_across_processes() -> None:
    code = (
        "import sys; from cake_core.ir.parser import parse; from cake_core.ir.hashing import structural_hash; "
        "print(structural_hash(parse(sys.stdin.read(), 'k.cake')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=KERNEL, capture_output=True, text=True, timeout=120, check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    )  # fmt: skip
    assert done.stdout.strip() == structural_hash(parse(KERNEL, "k.cake"))


# ---------------------------------------------------------------------------------------------------
# Types and effects
# ---------------------------------------------------------------------------------------------------


def test_it_type_checks(primitives: dict, registry: plugins.Registry) -> None:
    checked = _check(KERNEL, primitives, registry.get("targets", "h200"))
    assert checked.ok, [d.message for d in checked.diagnostics]
    (typed,) = _model(checked).ops
    assert typed.prim is registry.get("primitives", "scale.rows")
    dst, src = typed.operand("dst"), typed.operand("src")
    assert (dst.kind, dst.shape, src.kind, src.shape) == (Kind.GLOBAL, (32, 64), Kind.GLOBAL, (32, 64))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("x[t * R : +R, :]", "x[t * R : +16, :]"),
            "`scale.rows` writes [16, 64] into [32, 64]: the tile shapes must match",
        ),
        (("out: global f32", "out: global i32"), "`scale.rows` scales float tiles, `out` holds `i32`"),
    ],
    ids=["shapes", "dtype"],
)
def test_its_type_rule_reports_as_the_plugin(primitives: dict, edit: tuple[str, str], message: str) -> None:
    checked = _check(KERNEL.replace(*edit), primitives)
    (d,) = [d for d in checked.diagnostics if d.is_error]
    assert (d.code, d.message, d.plugin, d.primary.line) == ("CK006", message, "cake-example-plugin", OP_LINE)


def test_a_placement_the_signature_refuses(primitives: dict) -> None:
    """`dst` is global only: a shared destination is the core's operand error, from the signature."""
    text = STAGED.replace("scale.rows out[t * R : +R, :] <- xs", "scale.rows xs <- x[t * R : +R, :]")
    checked = _check(text, primitives)
    assert [d.code for d in checked.diagnostics if d.is_error] == ["CK005"]


def test_its_effects_are_declared(primitives: dict) -> None:
    prim = primitives["scale.rows"]
    (typed,) = _model(_check(KERNEL, primitives)).ops
    dst, src = prim.effects(typed)
    assert (dst.access, dst.tier, dst.masked) == (Access.WRITE, Kind.GLOBAL, True)
    assert (src.access, src.tier, src.masked) == (Access.READ, Kind.GLOBAL, True)
    (typed,) = _model(_check(KERNEL.replace(", oob=skip", ""), primitives)).ops
    assert [e.masked for e in prim.effects(typed)] == [False, False]
    # a shared source is never masked: the lowering guards global extents only
    staged = [t for t in _model(_check(STAGED, primitives), "T=f32").ops if t.prim is prim]
    assert [(e.tier, e.masked) for e in prim.effects(staged[0])] == [(Kind.GLOBAL, True), (Kind.SHARED, False)]


def test_its_cost_terms(primitives: dict, registry: plugins.Registry) -> None:
    model = _model(_check(STAGED, primitives, registry.get("targets", "a100")), "T=bf16")
    typed = next(t for t in model.ops if t.prim.name == "scale.rows")
    terms = typed.prim.cost(typed, _CostContext(model, registry.get("targets", "a100")))
    elements = 32 * 64
    assert (terms.flops, terms.global_bytes, terms.shared_bytes) == (elements, 2 * elements, 2 * elements)


# ---------------------------------------------------------------------------------------------------
# The interpreter
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
def test_it_runs_in_the_interpreter(primitives: dict, dtype: str) -> None:
    text = KERNEL.replace("f32[N, 64]", f"{dtype}[N, 64]")
    checked = _check(text, primitives)
    rng = np.random.default_rng(5)
    x = encode(rng.standard_normal((70, 64)).astype(np.float32), dtype)  # 70 rows: a partial last tile
    result = run_program(checked, {"x": x}, {"N": 70})
    assert result.ok, [str(f) for f in result.findings]
    assert result.ctas == 3
    want = encode(decode(x, dtype) * np.float32(3.0), dtype)  # f32 product, rounded to the element type
    np.testing.assert_array_equal(result.outputs["out"], want)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_it_runs_from_shared_memory(primitives: dict, dtype: str) -> None:
    checked = _check(STAGED, primitives)
    x = encode(np.random.default_rng(2).standard_normal((40, 64)).astype(np.float32), dtype)
    result = run_program(checked, {"x": x}, {"N": 40, "T": dtype}, policy="random", seed=3)
    assert result.ok, [str(f) for f in result.findings]
    np.testing.assert_array_equal(result.outputs["out"], encode(decode(x, dtype) * np.float32(0.5), dtype))


def test_the_bundled_schedule_passes_the_plugin_s_own_oracle(primitives: dict) -> None:
    problem = cake_example_plugin.SCALE_ROWS
    checked = _check(cake_example_plugin.schedule_path().read_text(), primitives, file="scale_rows.cake")
    shape, dtype = {"N": 130, "D": 128}, "bf16"
    inputs = problem.make_inputs(shape, dtype, seed=11)
    result = run_program(checked, inputs, {**shape, "T": dtype})
    assert result.ok, [str(f) for f in result.findings]
    report = problem.check(inputs, {"out": result.outputs["out"]}, shape, dtype)
    assert report.passed, report.summary()
    # and the oracle is not a rubber stamp: the input itself is not twice the input
    assert not problem.check(inputs, {"out": inputs["x"]}, shape, dtype).passed


def test_an_unmasked_tail_faults_in_the_interpreter(primitives: dict) -> None:
    checked = _check(KERNEL.replace(", oob=skip", ""), primitives)
    x = np.ones((70, 64), dtype=np.float32)
    result = run_program(checked, {"x": x}, {"N": 70})
    assert result.stopped
    (fault,) = [f for f in result.findings if f.fatal]
    assert (fault.id, fault.loc.line) == ("CS001", OP_LINE)
    assert "by `scale.rows`" in fault.message and dict(fault.cta) == {"t": 2}


# ---------------------------------------------------------------------------------------------------
# Lowering and NVRTC (no GPU needed)
# ---------------------------------------------------------------------------------------------------


def test_it_lowers_to_cuda(primitives: dict, registry: plugins.Registry) -> None:
    h200 = registry.get("targets", "h200")
    (spec,) = program_specs(_check(KERNEL, primitives, h200))

    def loop(text: str) -> tuple[str, str]:
        """The strided loop over the 32 x 64 tile by the role's 64 threads, and its body."""
        lines = [ln.strip() for ln in lower_program(_check(text, primitives, h200), h200, spec).source.splitlines()]
        i = next(i for i, ln in enumerate(lines) if ln.startswith("for (int cake_i") and "< 2048;" in ln)
        return lines[i], lines[i + 1]

    head, body = loop(KERNEL)
    assert head.startswith("for (int cake_i") and head.endswith("+= 64) {")
    # masked: the write is guarded by the tensor's extent, derived from the view, never written
    assert body.startswith("if ((t * R + ") and "< N) *(out + " in body and "(float)(3.0" in body
    _, unmasked = loop(KERNEL.replace(", oob=skip", ""))
    assert unmasked.startswith("*(out + ") and "< N" not in unmasked


@pytest.mark.parametrize("target", ["h200", "a100", "example-gpu", "b200"])
def test_it_compiles_with_nvrtc(primitives: dict, registry: plugins.Registry, target: str) -> None:
    tgt = registry.get("targets", target)
    checked = _check(STAGED, primitives, tgt, file="staged.cake")
    for spec in program_specs(checked):
        compiled = pipeline.compile_program(pipeline.build(checked, tgt, spec), tgt, cache=False)
        (resources,) = compiled.kernels.values()
        assert compiled.arch == tgt.nvrtc_arch and len(compiled.cubin) > 0
        assert resources.registers is not None and resources.registers > 0 and resources.spill_stores == 0


# ---------------------------------------------------------------------------------------------------
# A core rule checks it from its declared effects alone
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.glob("*.cake")))
def test_cases_meet_their_inline_expectations(registry: plugins.Registry, case: str) -> None:
    outcome = check_file(CASES / case, registry)
    assert outcome.ok, outcome.explain()
    if case.startswith("invalid_"):
        assert outcome.expected and all(e.code == "CR108" for e in outcome.expected)
    else:
        assert outcome.diagnostics == ()


def test_cr108_flags_an_unmasked_write_past_the_end_of_dst(registry: plugins.Registry) -> None:
    path = CASES / "invalid_shifted_write.cake"
    text = path.read_text()
    line = next(i for i, s in enumerate(text.splitlines(), 1) if s.lstrip().startswith("scale.rows"))
    (d,) = verify_source(text, str(path), registry.get("targets", "h200"), registry).diagnostics
    assert (d.code, d.slug, d.plugin) == ("CR108", "unmasked-out-of-bounds", "cake-rules-core")
    assert (d.primary.line, d.primary.col) == (line, text.splitlines()[line - 1].index("out[") + 1)
    assert d.message.startswith("`scale.rows` writes `out[t * R + 1 : +R, :]` out of bounds when N=64 (at t=0)")
    # the rule names the primitive's own mask attribute in its help, read from the signature
    assert d.help is not None and "`oob=skip`" in d.help


def test_cr108_accepts_the_write_once_masked(registry: plugins.Registry) -> None:
    text = (CASES / "invalid_tail_write_from_shared.cake").read_text()
    fixed = text.replace("factor=0.5  # expect-error[CR108]", "factor=0.5, oob=skip")
    target = registry.get("targets", "example-gpu")
    assert verify_source(fixed, "fixed.cake", target, registry).diagnostics == ()
    assert [d.code for d in verify_source(text, "tail.cake", target, registry).diagnostics] == ["CR108"]


# ---------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------


def _model(checked: CheckedModule, spec_label: str = "(single)") -> KernelModel:
    (model,) = [m for (_, spec), m in checked.models.items() if spec.label == spec_label]
    return model


@attrs.frozen
class _CostContext:
    """A :class:`cake_core.ir.primitive.CheckContext` over one kernel model, as a cost model builds one."""

    model: KernelModel
    target: Target

    @property
    def spec(self) -> dict[str, int | str]:
        return self.model.env

    def const(self, e: n.Expr) -> int | None:
        return try_int(e, self.model.env)

    def role_warps(self) -> int:
        return self.model.roles[0].per

    def error(self, code: str, loc: object, message: str, **kw: object) -> object:
        raise AssertionError(f"cost terms never report errors: {code} {message}")
