"""The knn CUDA reference without a GPU: its source, its NVRTC compile, its plan, and its kernels run on the
CPU through ``emulation/cuda_shim.h`` (g++) behind a stand-in runner, judged against the numpy assessment."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from cake_core.errors import CakeUserError
from cake_core.problems.knn import KNN, KNN_IP
from cake_core.problems.knn import cuda_reference as cr
from cake_core.problems.knn import oracle
from cake_core.problems.problem import METHOD_CUDA, METHOD_NUMPY
from cake_core.runtime.plan import ScalarArg, TensorArg

SHIM = Path(__file__).parent / "emulation"

# Runs the plan's six launches (grids and scalars from the command line) over files in DIR.
_MAIN = r"""
#include "cuda_shim.h"
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
using std::fmax;
using std::min;
static inline int atomicAdd(int* a, int v) { return std::atomic_ref<int>(*a).fetch_add(v); }
#include KMEANS_CU
#include KNN_CU

template <class T> static std::vector<T> load(const std::string& p, size_t n) {
    std::vector<T> v(n);
    FILE* f = std::fopen(p.c_str(), "rb");
    if (!f || std::fread(v.data(), sizeof(T), n, f) != n) std::exit(3);
    std::fclose(f);
    return v;
}
template <class T> static void save(const std::string& p, const std::vector<T>& v) {
    FILE* f = std::fopen(p.c_str(), "wb");
    if (!f || std::fwrite(v.data(), sizeof(T), v.size(), f) != v.size()) std::exit(4);
    std::fclose(f);
}
int main(int argc, char** argv) {
    if (argc != 18) return 2;
    long long a[17];
    for (int i = 1; i < 18; ++i) a[i - 1] = std::atoll(argv[i]);
    const int B = a[0], M = a[1], N = a[2], D = a[3], K = a[4], f16 = a[5], inner = a[6], cap = a[7];
    const int tiles = a[8], chunk = a[9];
    const float rtol = std::atof(argv[11]);
    const std::string dir = argv[17];
    const long long rows = (long long)B * M, el = rows * K;
    auto q = load<u16>(dir + "/q.bin", rows * D);
    auto x = load<u16>(dir + "/x.bin", (size_t)B * N * D);
    auto cand = load<int>(dir + "/cand.bin", el);
    std::vector<double> qq(rows, -7), xx((size_t)B * N, -7), score(el, -7), thr(el, -7), sorted(el, -7);
    std::vector<double> near_s(rows * cap, -7);
    std::vector<int> code(el, -1), hist(el, 0), fill(rows, 0), near_i(rows * cap, -7);
    launch({(unsigned)a[11], 1, 1}, 256, [&] { cake_ref_sqnorm(q.data(), qq.data(), rows, D, f16); });
    launch({(unsigned)a[12], 1, 1}, 256, [&] { cake_ref_sqnorm(x.data(), xx.data(), (long long)B * N, D, f16); });
    launch({(unsigned)a[13], 1, 1}, 256, [&] {
        cake_knn_candidates(q.data(), x.data(), cand.data(), qq.data(), xx.data(), code.data(), score.data(),
                            thr.data(), el, M, N, K, D, f16, inner, rtol);
    });
    launch({(unsigned)a[14], 1, 1}, 256, [&] { cake_knn_sort(thr.data(), sorted.data(), el, K); });
    launch({(unsigned)a[15], (unsigned)B, 1}, 256, [&] {
        cake_knn_count(q.data(), x.data(), qq.data(), xx.data(), score.data(), thr.data(), sorted.data(),
                       hist.data(), fill.data(), near_s.data(), near_i.data(), M, N, K, D, f16, inner, tiles,
                       chunk, cap);
    });
    save(dir + "/code.bin", code); save(dir + "/score.bin", score); save(dir + "/thr.bin", thr);
    save(dir + "/hist.bin", hist); save(dir + "/fill.bin", fill);
    save(dir + "/near_s.bin", near_s); save(dir + "/near_i.bin", near_i);
    return 0;
}
"""


def test_source_is_header_free_and_float64_but_for_rtol() -> None:
    code = re.sub(r"//[^\n]*", "", cr.reference_source())
    assert "#include" not in code and "__half" not in code
    own = code[code.index("cake_knn_candidates") - 200 :]
    assert re.findall(r"\bfloat\b", own) == ["float"]  # the rtol argument (a plan scalar is f32 at most)
    for fn in (cr.CANDIDATES, cr.SORT, cr.COUNT, cr.SQNORM):
        assert f"{fn}(" in code


def test_compiles_with_nvrtc_without_spills() -> None:
    pytest.importorskip("cuda.bindings.nvrtc")
    cr.compiled_reference.cache_clear()
    assert cr.compiled_reference("sm_90")[:4] == b"\x7fELF"
    from cake_core.runtime.nvrtc import compile_cuda

    kernels = compile_cuda(cr.reference_source(), "sm_90", name="knn_reference.cu").kernels
    assert {cr.CANDIDATES, cr.SORT, cr.COUNT} <= set(kernels)
    assert all(k.spill_stores == 0 and k.spill_loads == 0 for k in kernels.values())
    assert kernels[cr.COUNT].registers <= 128  # two blocks of 256 threads per SM


@pytest.mark.parametrize("shape", [{"B": 2, "M": 70, "N": 150, "D": 64, "K": 8},
                                   {"B": 1, "M": 4096, "N": 1 << 20, "D": 128, "K": 100}])  # fmt: skip
def test_plan_matches_the_kernels(shape: dict[str, int]) -> None:
    plan = cr.build_plan(shape, "f16", True, 1e-4, b"cubin")
    code = re.sub(r"//[^\n]*", "", cr.reference_source())
    kernels = re.compile(r'extern "C" __global__ void __launch_bounds__\(\d+\)\s*(\w+)\((.*?)\)\s*\{', re.S)
    sigs = {name: [p for p in params.split(",")] for name, params in kernels.findall(code)}
    names = {t.name for t in plan.tensors}
    for launch in plan.launches:
        params = sigs[launch.function]
        assert len(params) == len(launch.args), launch.function
        for p, arg in zip(params, launch.args, strict=True):
            assert isinstance(arg, TensorArg) == ("*" in p), (launch.function, p)
            if isinstance(arg, TensorArg):
                assert arg.name in names
            else:
                want = "f32" if "float" in p else "i64" if "long long" in p else "i32"
                assert isinstance(arg, ScalarArg) and arg.ctype == want, (launch.function, p)
    splits, chunk = cr.split_points(shape)
    assert chunk % cr.POINT_TILE == 0 and (splits - 1) * chunk < shape["N"] <= splits * chunk
    count = plan.launches[-1]
    assert count.grid[0] * count.grid[1] <= 2 * cr.TARGET_BLOCKS and count.grid[1] == shape["B"]
    assert plan.tensor("hist").poison == 0 and plan.tensor("fill").poison == 0


# -- the kernels, emulated on the CPU ----------------------------------------------------------------


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed")
    work = tmp_path_factory.mktemp("knn_emulator")
    (work / "main.cpp").write_text(_MAIN)
    kmeans_cu = Path(cr.kmeans_reference.__file__).with_name("reference.cu")
    knn_cu = Path(cr.__file__).with_name(cr.SOURCE_NAME)
    proc = subprocess.run(
        [gxx, "-std=c++20", "-O1", "-pthread", "-Wno-unknown-pragmas", f'-DKMEANS_CU="{kmeans_cu}"',
         f'-DKNN_CU="{knn_cu}"', f"-I{SHIM}", "-o", str(work / "knn_reference"), str(work / "main.cpp")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0 and "barrier" in proc.stderr and "No such file" in proc.stderr:
        pytest.skip("g++ lacks C++20 <barrier>")
    assert proc.returncode == 0, proc.stderr
    return work / "knn_reference"


@attrs.define
class EmulatedRunner:
    """Stands in for a GPU runner: runs a knn oracle plan's launches with the emulator."""

    exe: Path
    workdir: Path
    arch: str = "sm_90"

    def run(self, plan: Any, inputs: dict[str, np.ndarray], fetch: tuple[str, ...], timeout_s: float) -> Any:
        q, x, cand = inputs["q"], inputs["x"], inputs["cand"]
        b, m, d = q.shape
        n, k = x.shape[1], cand.shape[2]
        for name, arr in (("q", q.view(np.uint16)), ("x", x.view(np.uint16)), ("cand", cand.astype(np.int32))):
            arr.tofile(self.workdir / f"{name}.bin")
        count = plan.launches[-1]
        scalars = [a.value for a in count.args if isinstance(a, ScalarArg)]  # M N K D f16 inner tiles chunk cap
        rtol = next(a.value for a in plan.launches[2].args if isinstance(a, ScalarArg) and a.ctype == "f32")
        args = [b, m, n, d, k, scalars[4], scalars[5], scalars[8], scalars[6], scalars[7], rtol,
                *(launch.grid[0] for launch in plan.launches), self.workdir]  # fmt: skip
        subprocess.run([str(self.exe), *map(str, args)], check=True, timeout=timeout_s)
        outputs = {t.name: np.fromfile(self.workdir / f"{t.name}.bin", {"f64": np.float64, "i32": np.int32}[t.dtype])
                   for t in plan.tensors if t.kind == "output"}  # fmt: skip
        return attrs.make_class("Result", ["status", "error", "outputs"])("ok", None, outputs)


CASES = [
    ({"B": 2, "M": 65, "N": 90, "D": 64, "K": 2}, "bf16", False),  # ragged query and point tiles
    ({"B": 1, "M": 12, "N": 200, "D": 128, "K": 10}, "f16", True),  # inner product; 4 point tiles, 4 splits
    ({"B": 1, "M": 9, "N": 70, "D": 256, "K": 1}, "bf16", False),  # k = 1, D over 16 slices
]


def _plant(out: np.ndarray, worst: int, n: int) -> np.ndarray:
    """Out of range, a repeat, the worst point and a swapped pair, each in another row of batch 0."""
    bad = out.copy()
    bad[0, 1, 0] = n
    bad[0, 3, -1] = worst
    if bad.shape[2] > 1:
        bad[0, 2, 1] = bad[0, 2, 0]
        bad[0, 4, :2] = bad[0, 4, 1::-1]
    return bad


@pytest.mark.parametrize("shape,dtype,inner", CASES, ids=[f"{s}-{d}-{'ip' if i else 'l2'}" for s, d, i in CASES])
def test_emulated_reference_agrees_with_numpy(emulator: Path, tmp_path: Path, shape, dtype, inner) -> None:
    problem = KNN_IP if inner else KNN
    inputs = problem.make_inputs(shape, dtype, seed=shape["M"])
    ref = problem.reference(inputs, shape, dtype)["out"]
    worst = int(oracle.nearest_numpy(inputs["q"][:1], inputs["x"][:1], shape["N"], dtype, inner)[0, 3, -1])
    bad = _plant(ref, worst, shape["N"])
    runner = EmulatedRunner(emulator, tmp_path)
    for cand in (ref, bad):
        got = cr.assess_cuda(runner, inputs["q"], inputs["x"], cand, shape, dtype, inner, problem.rtol, arch="sm_90")
        want = oracle.assess_numpy(inputs["q"], inputs["x"], cand, dtype, inner, problem.rtol)
        for field in ("code", "nearer", "fill", "near_i"):
            assert np.array_equal(getattr(got, field), getattr(want, field)), field
        for field in ("score", "thr", "near_s"):
            np.testing.assert_allclose(getattr(got, field), getattr(want, field), rtol=1e-12, atol=1e-12)
        via_cuda = oracle.make_report(got, cand, shape["N"], inner, problem.rtol, METHOD_CUDA, 0.0)
        via_numpy = problem.check(inputs, {"out": cand}, shape, dtype)
        assert via_numpy.method == METHOD_NUMPY and via_cuda.passed == via_numpy.passed == (cand is ref)
        assert via_cuda.violations == via_numpy.violations and via_cuda.first == via_numpy.first
    assert via_numpy.violations >= (4 if shape["K"] > 1 else 2)  # the swapped pair: one rank of two fails


def test_check_goes_through_the_runner_above_the_numpy_limit(emulator: Path, tmp_path: Path) -> None:
    shape, dtype, _ = CASES[2]
    inputs = KNN.make_inputs(shape, dtype, 5)
    out = KNN.reference(inputs, shape, dtype)["out"]
    out[0, 4, 0] = -3
    runner = EmulatedRunner(emulator, tmp_path)
    small = attrs.evolve(KNN, numpy_limit=1000)
    assert small.oracle_method(shape, runner) == METHOD_CUDA and small.oracle_method(shape, None) == METHOD_NUMPY
    report = small.check(inputs, {"out": out}, shape, dtype, runner=runner)
    assert report.method == METHOD_CUDA and report.violations == 1
    assert report.first[0].position == (0, 4, 0) and "outside [0, 70)" in report.first[0].detail


def test_the_cuda_method_needs_a_runner() -> None:
    shape = CASES[0][0]
    inputs = KNN.make_inputs(shape, "bf16", 0)
    with pytest.raises(CakeUserError, match="needs a GPU runner"):
        KNN.check(inputs, {"out": np.zeros((2, 70, 8), np.int32)}, shape, "bf16", method=METHOD_CUDA)
