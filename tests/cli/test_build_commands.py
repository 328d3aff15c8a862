"""``cake lower``, ``cake compile`` and ``cake export`` on the committed schedules (NVRTC; no GPU needed):
the Ampere schedule for an A100 (a compile-only target here) and the Hopper one for an H200."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cake_core import cli

from .conftest import SCHEDULES

AMPERE = SCHEDULES / "ampere.cake"
HOPPER = SCHEDULES / "hopper.cake"
SHAPE = "T=bf16,D=128"
KERNELS = ("cake_centroid_norms__T_bf16__D_128", "cake_assign__T_bf16__D_128")
RESOURCE_FIELDS = {"name", "is_entry", "arch", "registers", "barriers", "stack_frame", "spill_stores",
                   "spill_loads", "shared_static", "local_bytes"}  # fmt: skip
RECORD_FIELDS = {"specialization", "ok", "target", "arch", "nvrtc", "cubin_bytes", "cache", "compile_s",
                 "kernels", "warnings", "smem_bytes"}  # fmt: skip


def test_lower_prints_standalone_cuda(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["lower", str(AMPERE), "--target", "a100", "--shape", SHAPE]) == 0
    source = capsys.readouterr().out
    for kernel in KERNELS:
        assert 'extern "C" __global__ void __launch_bounds__(' in source and f") {kernel}(" in source
    assert "#include" not in source  # header-free: NVRTC from PyPI ships no CUDA headers
    assert "mma.sync.aligned.m16n8k16" in source and "cp.async.cg.shared.global" in source
    assert "wgmma" not in source  # the Ampere path


def test_lower_writes_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ampere.cu"
    assert cli.main(["lower", str(AMPERE), "--target", "a100", "--shape", SHAPE, "-o", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert f") {KERNELS[1]}(" in out.read_text()


def _compile(capsys: pytest.CaptureFixture[str], path: Path, target: str) -> dict:
    assert cli.main(["compile", str(path), "--target", target, "--shape", SHAPE, "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert set(record) == RECORD_FIELDS
    assert record["ok"] is True and record["specialization"] == SHAPE and record["target"] == target
    assert record["cubin_bytes"] > 0 and record["cache"] in ("hit", "miss") and record["compile_s"] > 0
    assert set(record["kernels"]) == set(KERNELS) == set(record["smem_bytes"])
    for name, k in record["kernels"].items():
        assert RESOURCE_FIELDS <= set(k), name
        assert k["is_entry"] and k["arch"] == record["arch"] and 0 < k["registers"] <= 255
        assert k["spill_stores"] == 0 and k["spill_loads"] == 0
    return record


def test_compile_the_ampere_schedule_for_a100(capsys: pytest.CaptureFixture[str]) -> None:
    record = _compile(capsys, AMPERE, "a100")
    assert record["arch"] == "sm_80"
    assert 0 < record["smem_bytes"][KERNELS[1]] <= 166912  # a100's opt-in maximum per block
    assert record["warnings"] == []


def test_compile_the_hopper_schedule_for_h200(capsys: pytest.CaptureFixture[str]) -> None:
    record = _compile(capsys, HOPPER, "h200")
    assert record["arch"] == "sm_90a"
    assert 48 * 1024 < record["smem_bytes"][KERNELS[1]] <= 232448  # dynamic, over the 48 KiB default
    assert record["warnings"] == []  # e.g. an ignored setmaxnreg would be reported here


def test_compile_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compile", str(AMPERE), "--target", "a100", "--shape", SHAPE]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{SHAPE}: sm_80 cubin ") and "(NVRTC " in lines[0]
    for kernel in KERNELS:
        (line,) = [ln for ln in lines if ln.startswith(f"  {kernel}: ")]
        assert "registers" in line and "B spill stores" in line and "B dynamic shared" in line


def test_compile_a_file_with_type_errors_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.cake"
    # `M` is declared nowhere
    bad.write_text(AMPERE.read_text().replace("over (cdiv(N, BM), B)", "over (cdiv(M, BM), B)", 1))
    assert bad.read_text() != AMPERE.read_text()
    assert cli.main(["compile", str(bad), "--target", "a100", "--json"]) == 1
    diags = json.loads(capsys.readouterr().out)
    assert diags and diags[0]["code"] == "CK002" and diags[0]["file"] == str(bad)


def test_export_writes_a_source_and_a_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "export"
    assert cli.main(["export", str(AMPERE), "--target", "a100", "--shape", SHAPE, "-o", str(out)]) == 0
    cu, h = out / "ampere.cu", out / "ampere.h"
    assert sorted(p.name for p in out.iterdir()) == ["ampere.cu", "ampere.h"]
    launcher = "cake_ampere__T_bf16__D_128"
    assert f"{launcher}(" in h.read_text() and f"{launcher}(" in cu.read_text()
    stdout = capsys.readouterr().out.splitlines()
    assert stdout[0] == f"wrote {cu} and {h}: 1 launcher(s): {launcher}"
    assert stdout[1].startswith("build: nvcc -O3 -std=c++17 -gencode=arch=compute_80,code=sm_80 ")
