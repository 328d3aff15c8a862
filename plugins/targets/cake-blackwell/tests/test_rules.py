"""The Blackwell verifier rules (BW101-BW105): registered through ``cake_register_rules`` beside the
plugin's primitives, each well declared with an ``explain`` page, and each with a corpus of at least two
invalid kernels and a valid near miss under ``corpus/<ID>/``, whose inline expectations must be met
exactly. The corpus is verified with this plugin and the NVIDIA targets alone (``CAKE_PLUGINS``), so
another pack's findings never leak in; the near misses are also verified with every installed rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake_core import cli
from cake_core.verify.expectations import assert_file, corpus
from cake_core.verify.rule import SECTIONS
from cake_core.verify.runner import verify_source

import cake_blackwell

CORPUS = Path(__file__).parent / "corpus"
IDS = [cls.name for cls in cake_blackwell.RULES]


def test_rules_registered_under_the_plugin(registry):
    got = registry.registered_by("blackwell")
    assert got["rules"] == IDS == [f"BW10{i}" for i in range(1, 6)]
    for name in IDS:
        reg = registry.registration("rules", name)
        assert reg.plugin.distribution == "cake-blackwell" and reg.plugin.version == "0.2.0"
        assert reg.obj.problems() == [], name
    core = {n for n in registry.names("rules") if not n.startswith("BW")}
    assert not {n[:2] for n in core} & {"BW"}  # the pack's own id range


@pytest.mark.parametrize("rule", IDS)
def test_explain_prints_the_page(rule, capsys):
    assert cli.main(["explain", rule]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{rule} (") and "cake-blackwell 0.2.0" in out.splitlines()[0]
    assert all(s in out for s in SECTIONS) and "PTX ISA" in out


@pytest.mark.parametrize("rule", IDS)
def test_each_rule_has_its_corpus(rule):
    files = sorted((CORPUS / rule).glob("*.cake"))
    invalid = [f for f in files if f.name.startswith("invalid_")]
    valid = [f for f in files if f.name.startswith("valid_")]
    assert len(invalid) >= 2 and valid, rule
    for f in invalid:
        assert f"expect-error[{rule}]" in f.read_text(), f


@pytest.mark.parametrize("path", corpus(CORPUS), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_file(path: Path, pack_registry) -> None:
    assert_file(path, pack_registry)


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*/valid_*.cake")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_near_misses_pass_every_installed_rule(path: Path, registry) -> None:
    from cake_core.verify.expectations import named_target

    text = path.read_text()
    report = verify_source(text, str(path), registry.get("targets", named_target(text)), registry)
    assert report.ok, [f"{d.code} line {d.primary.line}: {d.message}" for d in report.diagnostics]


def test_diagnostics_point_at_file_line_and_column(pack_registry):
    path = CORPUS / "BW104" / "invalid_issuer_skips_wait.cake"
    text = path.read_text()
    report = verify_source(text, str(path), pack_registry.get("targets", "b200"), pack_registry)
    (d,) = report.diagnostics
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "expect-error[BW104]" in s)
    assert (d.code, d.primary.file, d.primary.line, d.primary.col) == ("BW104", str(path), line, 5)
    assert d.help and d.plugin == "cake-blackwell" and len(d.secondary) == 2


def _interpret(registry, path: Path, m: int = 200):
    """Run a corpus kernel (the tile_mma family) in the interpreter on ragged rows, fresh random inputs
    and a poisoned output; the findings and whether the output is the product."""
    import numpy as np
    from cake_core.hostdata import decode, encode
    from cake_core.ir.parser import parse
    from cake_core.ir.sema import check_module
    from cake_core.ir.types import DType
    from cake_core.semantics import run_program

    text = path.read_text()
    k = 128 if "x: global bf16[M, 128]" in text else 64
    checked = check_module(parse(text, str(path)), registry.by_name("primitives"),
                           registry.get("targets", "b200"), layouts=registry.by_name("layouts"))  # fmt: skip
    assert checked.ok, [str(d) for d in checked.diagnostics]
    rng = np.random.default_rng(m)
    x = encode(rng.standard_normal((m, k)).astype(np.float32), DType.BF16)
    c = encode(rng.standard_normal((128, k)).astype(np.float32), DType.BF16)
    out = np.full((m, 128), np.nan, dtype=np.float32)
    res = run_program(checked, {"x": x, "c": c, "out": out}, {"M": m})
    want = decode(x, DType.BF16).astype(np.float64) @ decode(c, DType.BF16).astype(np.float64).T
    return res.findings, bool(np.allclose(res.outputs["out"], want, rtol=1e-5, atol=1e-4))


@pytest.mark.parametrize("path", [p for p in sorted(CORPUS.glob("*/valid_*.cake")) if "tile_mma" in p.read_text()],
                         ids=lambda p: f"{p.parent.name}/{p.name}")  # fmt: skip
def test_near_misses_compute_the_product_in_the_interpreter(path: Path, registry) -> None:
    findings, right = _interpret(registry, path, m=77)
    assert findings == [] and right


def test_what_only_the_rules_see(registry) -> None:
    # the issuing role's missing wait and a warp outside its lane quarter run clean in the interpreter
    # (it lands the mma at the commit, and has no lanes): BW104 and BW103 are the only ones to refuse them
    for name in ("BW104/invalid_issuer_skips_wait.cake", "BW103/invalid_epilogue_after_one_warp.cake"):
        assert _interpret(registry, CORPUS / name) == ([], True), name
    # another role's missing wait the interpreter finds too, as a race on the region
    findings, _ = _interpret(registry, CORPUS / "BW104" / "invalid_epilogue_skips_wait.cake")
    assert any(f.code.code == "CS003" and "`acc`" in f.message for f in findings)


#: near misses of distinct shape: one role, the epilogue on the first or the second warpgroup, a K loop
COMPILED = ["BW101/valid_exact_fit.cake", "BW103/valid_epilogue_first.cake", "BW103/valid_epilogue_second_warpgroup.cake",
            "BW104/valid_commit_per_k_step.cake"]  # fmt: skip


@pytest.mark.parametrize("name", COMPILED)
def test_near_misses_compile_for_sm_100a(name: str, registry) -> None:
    from cake_core.ir.parser import parse
    from cake_core.ir.sema import check_module
    from cake_core.lower.program import lower_program, program_specs
    from cake_core.runtime.nvrtc import compile_cuda

    b200 = registry.get("targets", "b200")
    path = CORPUS / name
    checked = check_module(parse(path.read_text(), str(path)), registry.by_name("primitives"), b200,
                           layouts=registry.by_name("layouts"))  # fmt: skip
    (spec,) = program_specs(checked)
    result = compile_cuda(lower_program(checked, b200, spec).source, b200.nvrtc_arch)
    (fn,) = result.kernels.values() if isinstance(result.kernels, dict) else result.kernels
    assert fn.spill_stores == 0 and fn.spill_loads == 0
    assert "tcgen05.ld.sync.aligned.32x32b" in result.ptx and "tcgen05.dealloc" in result.ptx
