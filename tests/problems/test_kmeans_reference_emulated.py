"""The kmeans-assign CUDA reference's own logic, run on the CPU (no GPU needed).

``emulation/cuda_shim.h`` stands in for the CUDA features the reference uses (threads, shared memory,
barriers, warp shuffles), so g++ compiles ``reference.cu`` unchanged and runs its three kernels with the
grids of the plan. This checks the tiling, the masking of ragged tiles, tie-breaking, the shuffle
reductions, the f16/bf16 decoding and the verdict codes against the numpy oracle. What it cannot check
(the GPU memory model, the real warp schedule, the driver path) is left to the GPU tests.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from cake_core.hostdata import decode
from cake_core.problems.kmeans_assign import KMEANS_ASSIGN as P
from cake_core.problems.kmeans_assign import cuda_reference as cr
from cake_core.problems.kmeans_assign import oracle
from cake_core.problems.kmeans_assign.oracle import Assessment
from cake_core.problems.problem import METHOD_CUDA, METHOD_NUMPY

HERE = Path(__file__).parent / "emulation"


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed")
    exe = tmp_path_factory.mktemp("emulator") / "kmeans_reference"
    reference = Path(cr.__file__).with_name(cr.SOURCE_NAME)
    proc = subprocess.run(
        [
            gxx, "-std=c++20", "-O1", "-pthread", "-Wall", "-Wno-unknown-pragmas",
            f'-DREFERENCE_CU="{reference}"', f"-I{HERE}", "-o", str(exe), str(HERE / "kmeans_reference_main.cpp"),
        ],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0 and "barrier" in proc.stderr and "No such file" in proc.stderr:
        pytest.skip("g++ lacks C++20 <barrier>")
    assert proc.returncode == 0, proc.stderr
    return exe


def emulate(exe: Path, workdir: Path, x: np.ndarray, c: np.ndarray, cand: np.ndarray, dtype: str) -> Assessment:
    """Run the reference's kernels on the CPU with the grids of :func:`cr.build_plan`."""
    b, n, d = x.shape
    k = c.shape[1]
    shape = {"B": b, "N": n, "K": k, "D": d}
    sq, am, vd = cr.build_plan(shape, dtype, b"").launches
    x.view(np.uint16).tofile(workdir / "x.bin")
    c.view(np.uint16).tofile(workdir / "c.bin")
    cand.astype(np.int32).tofile(workdir / "cand.bin")
    args = [b, n, k, d, 1 if dtype == "f16" else 0, workdir, sq.grid[0], am.grid[0], am.grid[1], vd.grid[0]]
    subprocess.run([str(exe), *map(str, args)], check=True, timeout=600)
    return Assessment(
        ref_idx=np.fromfile(workdir / "ref_idx.bin", np.int32).reshape(b, n),
        rel_gap=np.fromfile(workdir / "rel_gap.bin", np.float64).reshape(b, n),
        code=np.fromfile(workdir / "code.bin", np.int32).reshape(b, n),
    )


def test_decoding_every_bit_pattern(emulator: Path, tmp_path: Path) -> None:
    subprocess.run([str(emulator), "decode", str(tmp_path)], check=True)
    got = np.fromfile(tmp_path / "decode.bin", np.float64).reshape(2, 65536)
    bits = np.arange(65536, dtype=np.uint16)
    with np.errstate(invalid="ignore"):
        expected = [bits.view(np.float16).astype(np.float64), decode(bits, "bf16", np.float64)]
    for g, e in zip(got, expected, strict=True):
        assert np.array_equal(g, e, equal_nan=True)
        assert np.array_equal(np.signbit(g), np.signbit(e))


CASES = [
    ({"B": 2, "N": 100, "K": 70, "D": 64}, "bf16"),  # ragged point and centroid tiles
    ({"B": 1, "N": 129, "K": 65, "D": 128}, "f16"),  # one point / one centroid past a tile
    ({"B": 3, "N": 64, "K": 1, "D": 256}, "bf16"),  # a single centroid; D spans 16 slices
    ({"B": 1, "N": 1, "K": 130, "D": 64}, "f16"),  # a single point
    ({"B": 2, "N": 150, "K": 200, "D": 128}, "bf16"),
]


@pytest.mark.parametrize("shape,dtype", CASES, ids=[f"{s}-{d}" for s, d in CASES])
def test_emulated_reference_agrees_with_numpy(
    emulator: Path, tmp_path: Path, shape: dict[str, int], dtype: str
) -> None:
    inputs = P.make_inputs(shape, dtype, seed=sum(shape.values()))
    cand = P.reference(inputs, shape, dtype)["out"]
    flat = cand.reshape(-1)
    rng = np.random.default_rng(0)
    k = shape["K"]
    plant = rng.permutation(flat.size)[:4]
    flat[plant[0]] = -1
    if flat.size > 1:
        flat[plant[1]] = k
    if flat.size > 2 and k > 1:
        flat[plant[2]] = (flat[plant[2]] + 1) % k
    got = emulate(emulator, tmp_path, inputs["x"], inputs["c"], cand, dtype)
    want = oracle.assess_numpy(inputs["x"], inputs["c"], cand, dtype)
    assert np.array_equal(got.code, want.code)
    assert np.array_equal(got.ref_idx, want.ref_idx)
    assert np.array_equal(np.isinf(got.rel_gap), np.isinf(want.rel_gap))
    finite = np.isfinite(want.rel_gap)
    np.testing.assert_allclose(got.rel_gap[finite], want.rel_gap[finite], rtol=1e-12, atol=1e-15)
    args = (inputs["x"], inputs["c"], cand, dtype, P.rtol)
    via_emulator = oracle.make_report(got, *args, METHOD_CUDA, 0.0)
    via_numpy = oracle.make_report(want, *args, METHOD_NUMPY, 0.0)
    assert not via_emulator.passed and via_emulator.violations == via_numpy.violations >= 1
    assert via_emulator.first == via_numpy.first


def test_emulated_ties_go_to_the_smallest_index(emulator: Path, tmp_path: Path) -> None:
    shape = {"B": 1, "N": 70, "K": 140, "D": 64}
    inputs = P.make_inputs(shape, "bf16", seed=9)
    c = inputs["c"]
    c[0, 33] = c[0, 2]  # same thread, other column pair
    c[0, 70] = c[0, 2]  # another tile
    c[0, 5] = c[0, 2]  # another thread of the half-warp
    c[0, 3] = c[0, 2]
    inputs["x"][0, :10] = c[0, 2]  # points sitting on the quadruplicated centroid
    cand = np.zeros((1, 70), np.int32)
    got = emulate(emulator, tmp_path, inputs["x"], inputs["c"], cand, "bf16")
    assert (got.ref_idx[0, :10] == 2).all()
    assert np.array_equal(got.ref_idx, P.reference(inputs, shape, "bf16")["out"])
