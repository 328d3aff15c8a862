"""``cake export``: a standalone .cu and header that nvcc builds, and (on a GPU) that runs correctly in a
process where Cake cannot be imported, checked by the oracle in another process."""

from __future__ import annotations

import ctypes.util
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from cake_core.cli import main

SCHEDULES = Path(__file__).resolve().parents[2] / "cake_core" / "problems" / "kmeans_assign" / "schedules"
NVCC = shutil.which("nvcc")
# the final benchmarked schedule and the overlapped variant
EXPORTED = pytest.mark.parametrize("schedule", ["hopper", "hopper_overlap"])


def _export(tmp_path: Path, schedule: str, shape: str) -> Path:
    out = tmp_path / "export"
    assert main(["export", str(SCHEDULES / f"{schedule}.cake"), "--target", "h200", "--shape", shape,
                 "-o", str(out)]) == 0  # fmt: skip
    return out


def _build(out: Path, stem: str) -> Path:
    lib = out / f"lib{stem}.so"
    r = subprocess.run(
        [NVCC, "-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-shared", "-Xcompiler", "-fPIC",
         "-o", str(lib), str(out / f"{stem}.cu")], capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return lib


@EXPORTED
def test_export_writes_a_header_and_a_source_without_cake(tmp_path: Path, schedule: str) -> None:
    out = _export(tmp_path, schedule, "T=bf16,D=128")
    cu = (out / f"{schedule}.cu").read_text()
    h = (out / f"{schedule}.h").read_text()
    assert "#include <cuda.h>" in cu and "#include \"" not in cu  # only system headers
    assert f"cake_{schedule}__T_bf16__D_128(void* x, void* c, void* out, void* workspace, int B, int K, int N" in h
    assert f"cake_{schedule}__T_bf16__D_128_workspace_bytes(int B, int K, int N)" in h
    assert "cuTensorMapEncodeTiled" in cu and "__grid_constant__" in cu
    # the header says the launchers return a cudaError_t, and they are declared so
    assert "returns a cudaError_t" in h and f'extern "C" cudaError_t cake_{schedule}__T_bf16__D_128(' in h
    assert "(int)cuda" not in cu


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@EXPORTED
def test_exported_source_builds_with_nvcc(tmp_path: Path, schedule: str) -> None:
    out = _export(tmp_path, schedule, "T=bf16,D=128")
    lib = _build(out, schedule)
    symbols = subprocess.run(["nm", "-D", str(lib)], capture_output=True, text=True).stdout
    assert f"cake_{schedule}__T_bf16__D_128" in symbols
    assert f"cake_{schedule}__T_bf16__D_128_workspace_bytes" in symbols


CHILD = textwrap.dedent(
    """
    import ctypes, sys
    import numpy as np
    sys.modules["cake_core"] = None  # Cake must not be needed: any import of it fails here
    try:
        import cake_core  # noqa: F401
        print("cake importable"); sys.exit(3)
    except ImportError:
        pass
    lib_path, cudart_path, data, B, N, K = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:7])
    symbol = sys.argv[7]
    rt = ctypes.CDLL(cudart_path)
    lib = ctypes.CDLL(lib_path)
    fn = getattr(lib, symbol)
    ws_fn = getattr(lib, symbol + "_workspace_bytes")
    ws_fn.restype = ctypes.c_size_t
    fn.restype = ctypes.c_int
    x, c = np.load(data + "/x.npy"), np.load(data + "/c.npy")
    def dev(nbytes):
        p = ctypes.c_void_p()
        assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(nbytes)) == 0
        return p
    dx, dc, dout = dev(x.nbytes), dev(c.nbytes), dev(B * N * 4)
    ws = dev(max(1, ws_fn(B, K, N)))
    H2D, D2H = 1, 2
    assert rt.cudaMemcpy(dx, x.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(x.nbytes), H2D) == 0
    assert rt.cudaMemcpy(dc, c.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(c.nbytes), H2D) == 0
    assert rt.cudaMemset(dout, 0xFF, ctypes.c_size_t(B * N * 4)) == 0
    err = fn(dx, dc, dout, ws, B, K, N, None)
    assert err == 0, err
    assert rt.cudaDeviceSynchronize() == 0
    out = np.empty((B, N), dtype=np.int32)
    assert rt.cudaMemcpy(out.ctypes.data_as(ctypes.c_void_p), dout, ctypes.c_size_t(out.nbytes), D2H) == 0
    np.save(data + "/out.npy", out)
    print("ran without cake")
    """
)


def _cudart() -> str | None:
    if NVCC is None:
        return None
    root = Path(NVCC).resolve().parents[1]
    for cand in [*root.glob("lib64/libcudart.so*"), *root.glob("targets/*/lib/libcudart.so*")]:
        return str(cand)
    return ctypes.util.find_library("cudart")


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@pytest.mark.gpu
@EXPORTED
def test_exported_kernel_runs_without_cake(tmp_path: Path, gpu_runner, record, schedule: str) -> None:
    from cake_core import plugins

    out = _export(tmp_path, schedule, "T=bf16,D=128")
    lib = _build(out, schedule)
    problem = plugins.registry().get("problems", "kmeans-assign")
    shape = {"B": 3, "N": 20011, "K": 1000, "D": 128}
    inputs = problem.make_inputs(shape, "bf16", 7)
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "x.npy", inputs["x"])
    np.save(data / "c.npy", inputs["c"])
    cudart = _cudart()
    assert cudart, "libcudart not found beside nvcc"
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    r = subprocess.run([sys.executable, str(child), str(lib), cudart, str(data), "3", "20011", "1000",
                        f"cake_{schedule}__T_bf16__D_128"],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0 and "ran without cake" in r.stdout, r.stdout + r.stderr
    report = problem.check(inputs, {"out": np.load(data / "out.npy")}, shape, "bf16", runner=gpu_runner)
    record("export", {"impl": f"export:{schedule}", "shape": shape, "dtype": "bf16", "correct": report.passed,
                      "oracle": report.summary()})  # fmt: skip
    assert report.passed, report.summary()
