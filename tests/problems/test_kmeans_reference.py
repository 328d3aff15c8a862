"""The kmeans-assign CUDA reference without a GPU: its source, its compile, its plan and its plumbing."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
import pytest

from cake_core.errors import CakeInternalError, CakeUserError
from cake_core.problems.kmeans_assign import KMEANS_ASSIGN as P
from cake_core.problems.kmeans_assign import cuda_reference as cr
from cake_core.problems.kmeans_assign import oracle
from cake_core.problems.problem import METHOD_CUDA
from cake_core.runtime.device import DeviceInfo
from cake_core.runtime.plan import Plan, ScalarArg, TensorArg

SHAPE = {"B": 2, "N": 300, "K": 37, "D": 64}


def test_source_is_header_free_and_float64() -> None:
    src = cr.reference_source()
    code = re.sub(r"//[^\n]*", "", src)
    assert "#include" not in code
    assert re.findall(r"\bfloat\b", code) == []  # no float32 accumulator anywhere
    assert "__half" not in code and "__nv_bfloat16" not in code
    for fn in (cr.SQNORM, cr.ARGMIN, cr.VERDICT):
        assert f"{fn}(" in code


def _nvrtc_compile(arch: str) -> tuple[bytes, str]:
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(cr.reference_source().encode(), b"reference.cu", 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    opts = [f"--gpu-architecture={arch}".encode(), b"--ptxas-options=-v"]
    (result,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    assert result == nvrtc.nvrtcResult.NVRTC_SUCCESS, log.decode(errors="replace")
    _, size = nvrtc.nvrtcGetCUBINSize(prog)
    cubin = b" " * size
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    nvrtc.nvrtcDestroyProgram(prog)
    return cubin, log.decode(errors="replace")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_90a", "sm_100a"])
def test_compiles_with_nvrtc_without_spills(arch: str) -> None:
    pytest.importorskip("cuda.bindings.nvrtc")
    cubin, log = _nvrtc_compile(arch)
    assert cubin[:4] == b"\x7fELF"
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert len(spills) == 3 and all(s == ("0", "0") for s in spills), log
    regs = {m[0]: int(m[1]) for m in re.findall(r"entry function '(\w+)'.*?Used (\d+) registers", log, re.S)}
    assert set(regs) == {cr.SQNORM, cr.ARGMIN, cr.VERDICT}
    # 3 blocks of 256 threads per SM on the parts Cake targets first; ptxas takes more on sm_100a
    assert regs[cr.ARGMIN] <= (80 if arch.startswith(("sm_80", "sm_90")) else 128)


def test_compiles_through_the_runtime() -> None:
    if importlib.util.find_spec("cake_core.runtime.nvrtc") is None:
        pytest.skip("cake_core.runtime.nvrtc is not available")
    cr.compiled_reference.cache_clear()
    assert cr.compiled_reference("sm_90a")[:4] == b"\x7fELF"


# -- the plan agrees with the kernels' signatures ----------------------------------------------------

_CTYPES = {"int": "i32", "long long": "i64"}
_POINTEE = {"u16": {"bf16", "f16"}, "double": {"f64"}, "int": {"i32"}}


def _signatures() -> dict[str, list[tuple[str, bool]]]:
    """kernel -> [(C type, is pointer)] parsed from reference.cu."""
    code = re.sub(r"//[^\n]*", "", cr.reference_source())
    out: dict[str, list[tuple[str, bool]]] = {}
    kernel = re.compile(r'extern "C" __global__ void __launch_bounds__\(\d+\)\s*(\w+)\((.*?)\)\s*\{', re.S)
    for name, params in kernel.findall(code):
        parsed = []
        for p in params.split(","):
            p = " ".join(p.replace("__restrict__", "").replace("const", "").split())
            is_ptr = "*" in p
            ctype = p.replace("*", " ").rsplit(" ", 1)[0].strip() if is_ptr else p.rsplit(" ", 1)[0]
            parsed.append((" ".join(ctype.split()), is_ptr))
        out[name] = parsed
    return out


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize(
    "shape", [SHAPE, {"B": 32, "N": 65536, "K": 1024, "D": 128}, {"B": 1, "N": 1, "K": 1, "D": 256}]
)
def test_plan_matches_the_kernels(dtype: str, shape: dict[str, int]) -> None:
    plan = cr.build_plan(shape, dtype, b"cubin")
    sigs = _signatures()
    assert [launch.function for launch in plan.launches] == [cr.SQNORM, cr.ARGMIN, cr.VERDICT]
    names = {t.name for t in plan.tensors}
    for launch in plan.launches:
        sig = sigs[launch.function]
        assert len(sig) == len(launch.args), launch.function
        for (ctype, is_ptr), arg in zip(sig, launch.args, strict=True):
            if is_ptr:
                assert isinstance(arg, TensorArg) and arg.name in names
                assert plan.tensor(arg.name).dtype in _POINTEE[ctype]
            else:
                assert isinstance(arg, ScalarArg) and arg.ctype == _CTYPES[ctype]
        assert launch.block == (256, 1, 1) and launch.cubin == "main" and launch.smem_bytes == 0
    b, n, k = shape["B"], shape["N"], shape["K"]
    sq, am, vd = plan.launches
    assert sq.grid == (-(-b * k // 8), 1, 1)
    assert am.grid == (-(-n // 64), b, 1)
    assert vd.grid == (-(-b * n // 8), 1, 1)
    kinds = {t.name: t.kind for t in plan.tensors}
    assert kinds == {
        "x": "input", "c": "input", "cand": "input", "cc": "scratch",
        "ref_idx": "output", "rel_gap": "output", "code": "output",
    }  # fmt: skip
    assert plan.tensor("x").shape == (b, n, shape["D"]) and plan.tensor("x").dtype == dtype
    scalars = [a.value for a in am.args if isinstance(a, ScalarArg)]
    assert scalars == [n, k, shape["D"], 1 if dtype == "f16" else 0]


def test_timeout_grows_with_the_work() -> None:
    assert cr.timeout_for(SHAPE) == pytest.approx(60.0, abs=0.1)
    assert 100 < cr.timeout_for({"B": 32, "N": 65536, "K": 1024, "D": 128}) < 200


# -- architecture from the runner --------------------------------------------------------------------


def test_arch_of() -> None:
    @attrs.define
    class WithInfo:
        info: DeviceInfo

        def device_info(self) -> DeviceInfo:
            return self.info

    @attrs.define
    class WithArch:
        arch: str

    @attrs.define
    class WithCapability:
        compute_capability: tuple[int, int]

    h200 = DeviceInfo(
        ordinal=0, name="NVIDIA H200", compute_capability=(9, 0), sm_count=132, max_threads_per_block=1024,
        max_threads_per_sm=2048, warp_size=32, max_shared_per_block=49152, max_shared_per_block_optin=232448,
        max_shared_per_sm=233472, reserved_shared_per_block=1024, l2_bytes=52428800, regs_per_sm=65536,
        regs_per_block=65536, max_blocks_per_sm=32, total_memory_bytes=150 << 30, driver_version=13000,
    )  # fmt: skip
    assert cr.arch_from_capability(9, 0) == "sm_90" and cr.arch_from_capability(8, 6) == "sm_86"
    assert cr.arch_of(WithInfo(h200)) == "sm_90"
    assert cr.arch_of(WithArch("sm_90a")) == "sm_90a"
    assert cr.arch_of(WithCapability((10, 0))) == "sm_100"
    with pytest.raises(CakeUserError, match="pass the oracle an explicit arch"):
        cr.arch_of(object())


def test_the_runtime_accepts_the_plan() -> None:
    from cake_core.runtime.prepare import poison_fill, validate_run

    shape = {"B": 2, "N": 300, "K": 37, "D": 64}
    for dtype in ("bf16", "f16"):
        inputs = P.make_inputs(shape, dtype, seed=0)
        plan = cr.build_plan(shape, dtype, b"\x7fELF")
        given = {"x": inputs["x"], "c": inputs["c"], "cand": np.zeros((2, 300), np.int32)}
        assert validate_run(plan, given, ("ref_idx", "rel_gap", "code"), None) == []
        for spec in plan.tensors:
            if spec.kind != "input":
                poison_fill(spec)


# -- plumbing through a stand-in runner --------------------------------------------------------------


@attrs.define
class _Result:
    status: str
    outputs: dict[str, np.ndarray]
    error: str | None = None


class _NumpyRunner:
    """Answers a reference plan as a correct GPU would, computed with numpy; records what it was given."""

    arch = "sm_90a"

    def __init__(self, status: str = "ok", corrupt: bool = False) -> None:
        self.status, self.corrupt = status, corrupt
        self.calls: list[tuple[Plan, dict[str, np.ndarray], tuple[str, ...], float]] = []

    def run(
        self, plan: Plan, inputs: Mapping[str, np.ndarray], *, fetch: tuple[str, ...], timing: Any = None,
        timeout_s: float,
    ) -> _Result:  # fmt: skip
        self.calls.append((plan, dict(inputs), fetch, timeout_s))
        for spec in plan.tensors:
            if spec.kind == "input":
                assert inputs[spec.name].shape == spec.shape
        dtype = plan.tensor("x").dtype
        a = oracle.assess_numpy(inputs["x"], inputs["c"], inputs["cand"], dtype)
        code = a.code.copy()
        if self.corrupt:
            code[0, 0] = oracle.CODE_REFERENCE_BUG
        outputs = {"ref_idx": a.ref_idx.ravel(), "rel_gap": a.rel_gap.ravel(), "code": code.ravel()}
        return _Result(self.status, {k: outputs[k] for k in fetch}, None if self.status == "ok" else "boom")


@pytest.fixture
def no_compile(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    compiled: list[str] = []

    def fake(arch: str) -> bytes:
        compiled.append(arch)
        return b"\x7fELF fake"

    monkeypatch.setattr(cr, "compiled_reference", fake)
    return compiled


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_cuda_path_reports_like_the_numpy_path(dtype: str, no_compile: list[str]) -> None:
    inputs = P.make_inputs(SHAPE, dtype, seed=2)
    out = P.reference(inputs, SHAPE, dtype)["out"]
    out[0, 3], out[1, 4], out[1, 5] = -1, 37, (out[1, 5] + 1) % 37
    runner = _NumpyRunner()
    via_gpu = P.check(inputs, {"out": out}, SHAPE, dtype, runner=runner, method=METHOD_CUDA)
    via_host = P.check(inputs, {"out": out}, SHAPE, dtype)
    assert via_gpu.method == METHOD_CUDA and no_compile == ["sm_90a"]
    assert (via_gpu.violations, via_gpu.first, via_gpu.worst_excess) == (
        via_host.violations, via_host.first, via_host.worst_excess,
    )  # fmt: skip
    ((plan, given, fetch, timeout),) = runner.calls
    assert fetch == ("ref_idx", "rel_gap", "code") and timeout >= 60
    assert given["cand"].dtype == np.int32 and given["x"] is inputs["x"]
    assert plan.cubins == {"main": b"\x7fELF fake"}
    P.check(inputs, {"out": out}, SHAPE, dtype, runner=runner, method=METHOD_CUDA, arch="sm_80")
    assert no_compile[-1] == "sm_80"


def test_cuda_path_is_chosen_above_the_numpy_limit(no_compile: list[str]) -> None:
    problem = type(P)(numpy_limit=1000)
    inputs = problem.make_inputs(SHAPE, "bf16", seed=3)
    out = problem.reference(inputs, SHAPE, "bf16")
    runner = _NumpyRunner()
    report = problem.check(inputs, out, SHAPE, "bf16", runner=runner)
    assert report.passed and report.method == METHOD_CUDA and len(runner.calls) == 1


def test_a_failing_reference_is_an_internal_error(no_compile: list[str]) -> None:
    inputs = P.make_inputs(SHAPE, "bf16", seed=4)
    out = P.reference(inputs, SHAPE, "bf16")
    with pytest.raises(CakeInternalError, match="ended with fault: boom"):
        P.check(inputs, out, SHAPE, "bf16", runner=_NumpyRunner(status="fault"), method=METHOD_CUDA)
    with pytest.raises(CakeInternalError, match="invalid argmin"):
        P.check(inputs, out, SHAPE, "bf16", runner=_NumpyRunner(corrupt=True), method=METHOD_CUDA)
