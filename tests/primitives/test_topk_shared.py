"""The shared-list path of top-k (:mod:`cake_core.primitives.topk_shared`): the insertion helper the GPU runs,
compiled for the host and driven against a sort (ties by unsigned index, rejections, long lists); the
merge into memory of sorted partial lists (global and shared, ragged rows) in the interpreter and through
NVRTC; ``topk.init``; and the type rules of shared states."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from cake_core import plugins
from cake_core.ir.parser import parse
from cake_core.ir.sema import check_module
from cake_core.lower.program import lower_program, select_spec
from cake_core.primitives import topk_shared
from cake_core.primitives._lower import PAIR_BETTER
from cake_core.primitives.topk import select_best
from cake_core.semantics import run_program

# the helper as host C++: a K-long sorted list, candidates from stdin, the list after each
_HOST = """
#include <cstdio>
#define __device__
#define __forceinline__ inline
PAIR
PUSH
int main() {
  float lv[KK]; int lx[KK];
  for (int e = 0; e < KK; ++e) { lv[e] = __builtin_inff(); lx[e] = -1; }
  float v; int x;
  while (std::scanf("%f %d", &v, &x) == 2) cake_topk_push<KK>(lv, lx, v, x);
  for (int e = 0; e < KK; ++e) std::printf("%.9g %d\\n", lv[e], lx[e]);
}
"""


@pytest.mark.parametrize("k", [1, 7, 100])
def test_the_insertion_keeps_the_k_best_sorted(k: int, tmp_path: Path) -> None:
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    src = _HOST.replace("PAIR", PAIR_BETTER).replace("PUSH", topk_shared._PUSH).replace("KK", str(k))
    (tmp_path / "push.cpp").write_text(src)
    subprocess.run([cxx, "-O1", "-o", str(tmp_path / "push"), str(tmp_path / "push.cpp")], check=True)
    rng = np.random.default_rng(k)
    n = 3000
    # few distinct values: many ties, broken by the unsigned index (negative ones sort last)
    vals = rng.integers(0, 40, n).astype(np.float32) / 4
    idx = rng.permutation(n).astype(np.int64) - 5
    feed = "".join(f"{v:.9g} {i}\n" for v, i in zip(vals, idx, strict=True))
    out = subprocess.run([str(tmp_path / "push")], input=feed, capture_output=True, text=True, check=True).stdout
    got = np.array([line.split() for line in out.splitlines()], dtype=np.float64)
    want_v, want_i = select_best(vals[None, :], idx[None, :], k)
    assert np.array_equal(got[:, 0], want_v[0]) and np.array_equal(got[:, 1].astype(np.int64), want_i[0])


# S = 4 sorted partial lists of KP per row, in global memory, merged into the K best per row
MERGE = """
kernel mg(pv: global f32[4, R0, KP], pi: global i32[4, R0, KP], out_v: global f32[R0, KK], out_i: global i32[R0, KK])
  domain R0 >= 1, KP in {40}, KK in {100}
  const R = 64
  grid (t) over (cdiv(R0, R))
  cta warps 2
  smem lv: f32[R, KK] pad 1
  smem li: i32[R, KK] pad 1
  role all warps 0..2:
    topk.reduce lv, li <- pv[:, t * R : +R, :], pi[:, t * R : +R, :], k=KK, oob=skip
    bar.sync
    topk.reduce out_v[t * R : +R, :], out_i[t * R : +R, :] <- lv, li, k=KK, oob=skip
"""


def _partials(rows: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    v = np.sort(rng.integers(0, 50, (4, rows, 40)).astype(np.float32), axis=-1)
    i = np.argsort(rng.random((4, rows, 40)), axis=-1).astype(np.int32)
    i += 40 * np.arange(4, dtype=np.int32)[:, None, None]  # distinct indices across the lists
    v[1, :, 30:] = np.inf  # a list with empty slots
    i[1, :, 30:] = -1
    order = np.lexsort((i.astype(np.int64) & 0xFFFFFFFF, v), axis=-1)  # each list sorted, ties by index
    return np.take_along_axis(v, order, -1), np.take_along_axis(i, order, -1)


def test_sorted_partials_merge_into_memory(compile_cake) -> None:
    checked = compile_cake(MERGE)
    rng = np.random.default_rng(3)
    pv, pi = _partials(70, rng)
    result = run_program(checked, {"pv": pv, "pi": pi}, {"R0": 70, "KK": 100})
    assert result.ok, [str(f) for f in result.findings]
    cand_v = pv.transpose(1, 0, 2).reshape(70, -1)
    cand_i = pi.transpose(1, 0, 2).reshape(70, -1).astype(np.int64)
    want_v, want_i = select_best(cand_v, cand_i, 100)
    assert np.array_equal(result.outputs["out_v"], want_v) and np.array_equal(result.outputs["out_i"], want_i)


def test_the_merge_without_its_barrier_is_a_race(compile_cake, plant) -> None:
    checked = compile_cake(plant(MERGE, "    bar.sync\n", ""))
    pv, pi = _partials(70, np.random.default_rng(3))
    assert "CS003" in run_program(checked, {"pv": pv, "pi": pi}, {"R0": 70, "KK": 100}).codes


def test_the_merge_lowers_and_compiles_without_spills() -> None:
    from cake_core.runtime.nvrtc import NvrtcUnavailableError, compile_cuda

    reg = plugins.registry()
    target = reg.get("targets", "h200")
    checked = check_module(parse(MERGE, "merge.cake"), {p.name: p for p in reg.values("primitives")}, target)
    assert checked.ok, [d.message for d in checked.diagnostics if d.is_error]
    source = lower_program(checked, target, select_spec(checked, {"KP": 40, "KK": 100})).source
    # a head compared per list: the 4 global lists of the first merge, the one shared list of the second
    assert source.count("cake_argmin_better(cake_v, cake_x, cake_bv, cake_bx)") == 5
    try:
        result = compile_cuda(source, target.nvrtc_arch)
    except NvrtcUnavailableError as exc:
        pytest.skip(str(exc))
    assert all(k.spill_stores == 0 and k.spill_loads == 0 for k in result.kernels.values()), result.kernels


# -- topk.init and the type rules of shared states ----------------------------------------------------

TYPES = """
kernel k(bias: global f32[C0], out: global i32[64, 8])
  domain C0 >= 1
  grid (t) over (1)
  cta warps 4
  smem sv: f32[64, 8]
  smem si: i32[64, 8]
  smem s4: i32[64, 4]
  role all warps 0..4:
    reg tile: f32[64, 32] layout rows
    reg wacc: f32[64, 32] layout wgmma_acc
    LINE
"""


@pytest.mark.parametrize("line,message", [
    ("topk.update sv, si <- tile, bias[0 : +32], base=0, k=8", "takes `wgmma_acc` tiles"),
    ("topk.init sv, s4 <-", "values and indices of one shape"),
    ("topk.init si, sv <-", "f32 values"),
])  # fmt: skip
def test_type_rules(check, line, message) -> None:
    checked = check(TYPES.replace("LINE", line))
    assert not checked.ok
    assert any(message in d.message for d in checked.diagnostics), [d.message for d in checked.diagnostics]


@pytest.mark.parametrize("line", [
    "topk.init sv, si <-",
    "topk.update sv, si <- wacc, bias[0 : +32], base=0, k=8, limit=C0",
    "topk.reduce sv, out <- sv, si, k=8",
])  # fmt: skip
def test_well_typed_lines_check_clean(check, line) -> None:
    checked = check(TYPES.replace("LINE", line))
    assert checked.ok, [d.message for d in checked.diagnostics]


def test_init_empties_every_list(compile_cake) -> None:
    text = """
kernel k(out_v: global f32[64, 8], out_i: global i32[64, 8])
  grid (t) over (1)
  cta warps 4
  smem sv: f32[64, 8]
  smem si: i32[64, 8]
  role all warps 0..4:
    topk.init sv, si <-
    bar.sync
    topk.reduce out_v, out_i <- sv, si, k=8
"""
    result = run_program(compile_cake(text), {}, {})
    assert result.ok, [str(f) for f in result.findings]
    assert np.all(result.outputs["out_v"] == np.inf) and np.all(result.outputs["out_i"] == -1)
