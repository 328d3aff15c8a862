"""``cake run kmeans-assign --target b200`` on a machine without a B200, through the command: the schedule
this plugin contributes is seeded, passes every gate, compiles for sm_100a and ranks first by the cost
model, which says its B200 figures are datasheet figures, uncalibrated, and that nothing ran; ``cake export
--target b200`` writes its standalone .cu and host launcher, which a gpu-marked test builds with nvcc for
sm_100a (it cannot run on the H200 that has nvcc)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cake_core import cli
from cake_core.runtime import device, sass
from cake_core.runtime.device import requires_gpu

from cake_blackwell import SCHEDULES

NVCC = shutil.which("nvcc")


def test_cake_run_on_b200_ranks_blackwell_first_and_says_nothing_ran(tmp_path: Path, capsys, monkeypatch) -> None:
    # the CPU path also where a GPU is installed (none of them is a B200)
    monkeypatch.setattr(device, "driver_status", lambda **_: (False, "the CPU path, by the test"))
    # the budget takes the schedules written for the target first: blackwell.cake, then ampere.cake
    rc = cli.main(["run", "kmeans-assign", "--target", "b200", "--budget", "2", "--workers", "1",
                   "--out", str(tmp_path)])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0, out
    record = json.loads((tmp_path / "run.json").read_text())
    cands = {c["name"]: c for c in record["candidates"]}
    assert set(cands) == {"blackwell", "ampere"} and {c["status"] for c in cands.values()} == {"compiled"}
    assert cands["blackwell"]["predicted_ms"] < cands["ampere"]["predicted_ms"]
    summary = record["summary"]
    assert summary["best"] == "blackwell" and summary["measured"] is False and summary["best_ms"] is None
    assert summary["spent"]["gpu_benchmarks"] == 0
    bench = summary["stages"]["benchmark"]
    assert "nothing was measured (ran: false)" in bench and "(uncalibrated)" in bench
    assert "Its b200 rates are datasheet figures, uncalibrated" in bench
    # the run directory holds the best kernel and its standalone export
    assert (tmp_path / "best.cake").read_text() == (SCHEDULES / "blackwell.cake").read_text()
    assert "tcgen05.mma.cta_group::1.kind::f16" in (tmp_path / "best.cu").read_text()


def _export(out: Path) -> Path:
    assert cli.main(["export", str(SCHEDULES / "blackwell.cake"), "--target", "b200", "--shape", "T=bf16,D=128",
                     "-o", str(out)]) == 0  # fmt: skip
    return out


def test_cake_export_writes_a_standalone_source_with_its_launcher(tmp_path: Path) -> None:
    out = _export(tmp_path)
    cu, h = (out / "blackwell.cu").read_text(), (out / "blackwell.h").read_text()
    assert "#include \"" not in cu and "tcgen05.alloc.cta_group::1" in cu
    assert 'extern "C" cudaError_t cake_blackwell__T_bf16__D_128(void* x, void* c, void* out, void* workspace' in h
    # the launcher builds the TMA tensor maps and raises the kernel's dynamic shared-memory limit
    assert "cuTensorMapEncodeTiled" in cu and "cudaFuncAttributeMaxDynamicSharedMemorySize" in cu


@requires_gpu  # where the GPU tests run (the H200 machine has nvcc); it cannot run the kernel there
@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_the_export_builds_with_nvcc_for_sm_100a(tmp_path: Path) -> None:
    out = _export(tmp_path)
    lib = out / "libblackwell.so"
    cmd = [NVCC, "-O3", "-std=c++17", "-gencode=arch=compute_100a,code=sm_100a", "-shared", "-Xcompiler", "-fPIC",
           "-o", str(lib), str(out / "blackwell.cu")]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    symbols = subprocess.run(["nm", "-D", str(lib)], capture_output=True, text=True).stdout
    assert "cake_blackwell__T_bf16__D_128" in symbols and "cake_blackwell__T_bf16__D_128_workspace_bytes" in symbols
    tool = sass.find_tool("cuobjdump")
    if tool is not None:  # the `sass` extra: the library's kernel is the tcgen05 one
        listing = subprocess.run([str(tool), "-sass", str(lib)], capture_output=True, text=True, check=True).stdout
        assert "UTCHMMA" in listing and "HGMMA" not in listing
