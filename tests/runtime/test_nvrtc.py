"""NVRTC compilation without a GPU: architectures, resource report, findings, errors and the cache."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from cake_core.convert import unstructure
from cake_core.errors import CakeUserError
from cake_core.runtime.nvrtc import (
    BASE_OPTIONS,
    SUPPORTED_ARCHS,
    CompileError,
    cache_key,
    compile_cuda,
    nvrtc_version,
)


@pytest.fixture(autouse=True)
def _private_cache(cache_dir: Path) -> Path:
    """No test writes to (or reads from) the user's real cache."""
    return cache_dir


@pytest.mark.parametrize("arch", SUPPORTED_ARCHS)
def test_header_free_kernel_compiles_for_every_arch(arch: str, kernels: ModuleType) -> None:
    r = compile_cuda(kernels.VADD, arch, name="vadd.cu")
    assert r.cubin[:4] == b"\x7fELF"
    assert r.arch == arch
    assert r.options[0] == f"--gpu-architecture={arch}"
    assert r.options[1:4] == BASE_OPTIONS
    assert r.nvrtc_version == nvrtc_version() and r.nvrtc_version[0] >= 12
    assert "Compiling entry function 'vadd'" in r.log
    k = r.kernel("vadd")
    assert k.is_entry and k.arch == arch
    assert k.registers is not None and k.registers > 0
    assert not k.spills and k.stack_frame == 0
    assert ".entry vadd" in r.ptx
    assert r.compile_s > 0 and r.wall_s > 0
    assert r.cache_status == "miss" and not r.cache_hit


def test_wgmma_compiles_only_for_sm90a(kernels: ModuleType) -> None:
    r = compile_cuda(kernels.WGMMA, "sm_90a")
    assert r.kernel("wgmma_tile").registers > 0
    for arch in ("sm_90", "sm_100a"):
        with pytest.raises(CompileError) as info:
            compile_cuda(kernels.WGMMA, arch)
        err = info.value
        assert isinstance(err, CakeUserError)
        assert err.arch == arch
        assert "wgmma" in err.first_error and "error" in err.first_error
        assert err.first_error in err.log
        assert arch in str(err)


def test_tma_and_mbarrier_compile_for_sm90a_only(kernels: ModuleType) -> None:
    r = compile_cuda(kernels.TMA, "sm_90a")
    assert r.kernel("tma_box").barriers == 1
    with pytest.raises(CompileError):
        compile_cuda(kernels.TMA, "sm_80")


def test_forced_spill_is_reported(kernels: ModuleType) -> None:
    free = compile_cuda(kernels.SPILL, "sm_90a").kernel("spill")
    assert not free.spills
    capped = compile_cuda(kernels.SPILL, "sm_90a", options=["-maxrregcount=32"])
    k = capped.kernel("spill")
    assert k.registers is not None and k.registers <= 32
    assert k.spill_stores > 0 and k.spill_loads > 0 and k.spills
    assert k.stack_frame > 0
    assert "-maxrregcount=32" in capped.options
    assert capped.cache_key != compile_cuda(kernels.SPILL, "sm_90a").cache_key


def test_stack_frame_shared_memory_and_barriers(kernels: ModuleType) -> None:
    k = compile_cuda(kernels.STACK, "sm_89").kernel("stack")
    assert k.stack_frame >= 400 and not k.spills
    s = compile_cuda(kernels.SHARED, "sm_90").kernel("shared_rev")
    assert s.shared_static == 256 * 4
    assert s.barriers == 1


def test_constant_bank_reported_where_ptxas_prints_it(kernels: ModuleType) -> None:
    k = compile_cuda(kernels.VADD, "sm_86").kernel("vadd")
    assert k.constant.get(0, 0) > 0  # kernel parameters live in cmem[0]
    assert k.constant_bytes >= k.constant[0]


def test_ignored_setmaxnreg_is_a_structured_finding(kernels: ModuleType) -> None:
    r = compile_cuda(kernels.SETMAXNREG_UNCAPPED, "sm_90a")
    assert r.setmaxnreg_ignored
    (finding,) = r.findings("setmaxnreg_ignored")
    assert finding.source == "ptxas"
    assert "setmaxnreg" in finding.message
    assert finding.line in r.log
    capped = compile_cuda(kernels.SETMAXNREG_CAPPED, "sm_90a")
    assert not capped.setmaxnreg_ignored and not capped.findings("setmaxnreg_ignored")


def test_frontend_warning_is_kept(kernels: ModuleType) -> None:
    src = 'extern "C" __global__ void f(float* x) { int unused; x[0] = 1.0f; }'
    r = compile_cuda(src, "sm_80")
    (w,) = [w for w in r.warnings if w.source == "nvrtc"]
    assert w.kind == "nvrtc_warning" and "unused" in w.message and w.code


def test_syntax_error_raises_compile_error_with_first_error_line() -> None:
    src = 'extern "C" __global__ void f(float* x) { x[0] = undefined_thing; }'
    with pytest.raises(CompileError) as info:
        compile_cuda(src, "sm_80", name="broken.cu")
    err = info.value
    assert err.first_error.startswith("broken.cu(1): error")
    assert "undefined_thing" in err.first_error
    assert "1 error detected" in err.log
    assert err.name == "broken.cu"


def test_bad_arch_and_options_are_user_errors(kernels: ModuleType) -> None:
    with pytest.raises(CakeUserError, match="bad GPU architecture"):
        compile_cuda(kernels.VADD, "hopper")
    with pytest.raises(CakeUserError, match="as `arch`"):
        compile_cuda(kernels.VADD, "sm_90", options=["--gpu-architecture=sm_80"])
    with pytest.raises(CompileError):  # well-formed but unknown to NVRTC
        compile_cuda(kernels.VADD, "sm_11")
    with pytest.raises(CompileError):
        compile_cuda(kernels.VADD, "sm_90", options=["--no-such-option"])


def test_result_json_has_no_binary(kernels: ModuleType) -> None:
    r = compile_cuda(kernels.VADD, "sm_90")
    data = unstructure(r)
    json.dumps(data)
    assert data["cubin_bytes"] == len(r.cubin)
    assert data["functions"]["vadd"]["registers"] == r.kernel("vadd").registers


# ------------------------------------------------------------------------------------------ cache


def _entries(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.glob("*/*.json")) if cache_dir.exists() else []


def test_cache_miss_then_hit(kernels: ModuleType, cache_dir: Path) -> None:
    first = compile_cuda(kernels.VADD, "sm_90a")
    assert first.cache_status == "miss"
    (entry,) = _entries(cache_dir)
    assert entry.name == f"{first.cache_key}.json"
    second = compile_cuda(kernels.VADD, "sm_90a")
    assert second.cache_hit and second.cache_status == "hit"
    assert second.cubin == first.cubin and second.log == first.log and second.ptx == first.ptx
    assert second.kernel("vadd") == first.kernel("vadd")
    assert second.compile_s == pytest.approx(first.compile_s)
    # a different architecture, source, option set or file name is another entry
    assert compile_cuda(kernels.VADD, "sm_90").cache_status == "miss"
    assert compile_cuda(kernels.VADD + "\n", "sm_90a").cache_status == "miss"
    assert compile_cuda(kernels.VADD, "sm_90a", options=["-DX=1"]).cache_status == "miss"
    assert compile_cuda(kernels.VADD, "sm_90a", name="other.cu").cache_status == "miss"
    assert len(_entries(cache_dir)) == 5


def test_cache_key_sorts_options(kernels: ModuleType) -> None:
    a = cache_key(kernels.VADD, "sm_90a", ["-DA=1", "-DB=2"])
    assert a == cache_key(kernels.VADD, "sm_90a", ["-DB=2", "-DA=1"])
    assert a != cache_key(kernels.VADD, "sm_90", ["-DA=1", "-DB=2"])
    r1 = compile_cuda(kernels.VADD, "sm_90a", options=["-DA=1", "-DB=2"])
    r2 = compile_cuda(kernels.VADD, "sm_90a", options=["-DB=2", "-DA=1"])
    assert r2.cache_hit and r2.cache_key == r1.cache_key


def test_cache_bypass(kernels: ModuleType, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = compile_cuda(kernels.VADD, "sm_80", cache=False)
    assert r.cache_status == "off" and not _entries(cache_dir)
    monkeypatch.setenv("CAKE_NO_CACHE", "1")
    r = compile_cuda(kernels.VADD, "sm_80")
    assert r.cache_status == "off" and not _entries(cache_dir)
    monkeypatch.setenv("CAKE_NO_CACHE", "0")
    assert compile_cuda(kernels.VADD, "sm_80").cache_status == "miss"
    assert compile_cuda(kernels.VADD, "sm_80").cache_status == "hit"
    monkeypatch.setenv("CAKE_NO_CACHE", "1")
    assert compile_cuda(kernels.VADD, "sm_80").cache_status == "off"


def test_explicit_cache_directory(kernels: ModuleType, tmp_path: Path) -> None:
    where = tmp_path / "elsewhere"
    assert compile_cuda(kernels.VADD, "sm_80", cache_directory=where).cache_status == "miss"
    assert compile_cuda(kernels.VADD, "sm_80", cache_directory=where).cache_status == "hit"
    assert len(list(where.glob("*/*.json"))) == 1


@pytest.mark.parametrize(
    "damage",
    ["garbage", "truncate", "bad_checksum", "wrong_key", "empty"],
)
def test_corrupt_cache_entry_is_ignored_and_rewritten(kernels: ModuleType, cache_dir: Path, damage: str) -> None:
    good = compile_cuda(kernels.VADD, "sm_90a")
    (entry,) = _entries(cache_dir)
    raw = entry.read_text()
    if damage == "garbage":
        entry.write_bytes(b"\x00\xffnot json at all")
    elif damage == "truncate":
        entry.write_text(raw[: len(raw) // 2])
    elif damage == "bad_checksum":
        data = json.loads(raw)
        data["cubin_sha256"] = "0" * 64
        entry.write_text(json.dumps(data))
    elif damage == "wrong_key":
        data = json.loads(raw)
        data["key"] = "f" * 64
        entry.write_text(json.dumps(data))
    else:
        entry.write_text("")
    again = compile_cuda(kernels.VADD, "sm_90a")
    assert again.cache_status == "corrupt"
    assert again.cubin[:4] == b"\x7fELF"
    assert again.kernel("vadd").registers == good.kernel("vadd").registers
    third = compile_cuda(kernels.VADD, "sm_90a")
    assert third.cache_hit  # the entry was rewritten
    assert json.loads(entry.read_text())["key"] == good.cache_key


def test_failed_compile_is_not_cached(cache_dir: Path) -> None:
    src = 'extern "C" __global__ void f(float* x) { x[0] = nope; }'
    for _ in range(2):
        with pytest.raises(CompileError):
            compile_cuda(src, "sm_80")
    assert not _entries(cache_dir)
