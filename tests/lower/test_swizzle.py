"""``cp.async`` and ``ldmatrix`` address swizzled shared buffers: a 16-byte chunk lands, and is read back, where
the buffer's swizzle puts it (panels of the swizzle width, chunk bits XOR address bits from 7 up, as TMA writes
them), so a one-role Ampere-style kernel may swizzle its rings instead of padding them.

``ampere.cake`` with its x rows swizzled 128B (two panels a row at D = 128) and its centroid ring 64B (32-wide K
chunks of 16-bit elements) passes the verifier (CR120 accepts both primitives as swizzle-aware), the interpreter
gate and NVRTC; on the GPU it is checked against the oracle at a ragged cell."""

from __future__ import annotations

from pathlib import Path

import pytest

from cake_core import pipeline, plugins
from cake_core.loop.benchmark import bench_candidate, program_values
from cake_core.runtime.plan import Timing

SCHEDULES = Path(__file__).resolve().parents[2] / "cake_core" / "problems" / "kmeans_assign" / "schedules"
CELL = {"B": 2, "N": 1000, "K": 300, "D": 128}


def _swizzled() -> pipeline.Candidate:
    text = (SCHEDULES / "ampere.cake").read_text()
    for old, new in (("smem xs: T[BM, D] pad 8", "smem xs: T[BM, D] swizzle 128B"),
                     ("smem cs: T[S][BN, BK] pad 8", "smem cs: T[S][BN, BK] swizzle 64B")):  # fmt: skip
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    reg = plugins.registry()
    return pipeline.Candidate(pipeline.load_text(text, "ampere_swizzled.cake"), reg.get("targets", "h200"))


def test_a_swizzled_ampere_kernel_verifies_keeps_its_meaning_and_compiles() -> None:
    reg = plugins.registry()
    cand = _swizzled()
    checked = cand.check()
    assert checked.ok, checked.diagnostics
    assert not [d.message for d in cand.verify().diagnostics if d.is_error]
    gate = cand.interp_gate(reg.get("problems", "kmeans-assign"))
    assert gate.ok, [d.message for d in gate.diagnostics]
    values = program_values(checked, reg.get("problems", "kmeans-assign"), CELL, "bf16")
    spec = cand.spec(values)
    assert cand.build(spec).source.count("cake_swizzled(") >= 3  # the copies and both fragment loads
    compiled = cand.compile(spec, cache=False)
    assert compiled.kernels and all(k.spill_stores == 0 for k in compiled.kernels.values())


@pytest.mark.gpu
def test_a_swizzled_ampere_kernel_is_right_on_the_gpu(gpu_runner: object) -> None:
    reg = plugins.registry()
    m = bench_candidate(_swizzled(), reg.get("problems", "kmeans-assign"), CELL, "bf16", gpu_runner,
                        impl="cake:ampere_swizzled", commit="test", timing=Timing(warmup=1, reps=3))  # fmt: skip
    assert (m.status, m.correct) == ("ok", True), (m.error, m.oracle)
