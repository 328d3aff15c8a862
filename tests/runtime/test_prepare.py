"""Host-side plan checks, scalar packing, poison patterns and kernel-parameter packing (no GPU)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from cake_core.runtime.device import driver_status
from cake_core.runtime.executor import PlanError, encode_tensor_map, pack_params
from cake_core.runtime.plan import KernelLaunch, Plan, ScalarArg, TensorArg, TensorMapArg, TensorSpec, Timing
from cake_core.runtime.prepare import host_dtype, poison_fill, scalar_value, validate_run


def _plan(**kw: object) -> Plan:
    tensors = kw.pop(
        "tensors",
        [TensorSpec("x", "f32", (8,)), TensorSpec("y", "f32", (8,), kind="output")],
    )
    launches = kw.pop(
        "launches", [KernelLaunch("k", (1, 1, 1), (32, 1, 1), [TensorArg("x"), TensorArg("y"), ScalarArg(8)])]
    )
    return Plan(label="t", cubins=kw.pop("cubins", {"main": b"\x7fELF..."}), tensors=tensors, launches=launches)


def test_a_good_plan_has_no_problems() -> None:
    x = np.zeros(8, np.float32)
    assert validate_run(_plan(), {"x": x}, ("y",), Timing()) == []


def test_input_problems() -> None:
    plan = _plan()
    assert validate_run(plan, {}, ("y",), None) == ["input `x` is missing"]
    (p,) = validate_run(plan, {"x": np.zeros(8, np.float64)}, ("y",), None)
    assert "dtype float64" in p
    (p,) = validate_run(plan, {"x": np.zeros((2, 4), np.float32)}, ("y",), None)
    assert "shape (2, 4)" in p
    probs = validate_run(plan, {"x": np.zeros(8, np.float32), "z": np.zeros(1)}, ("w",), None)
    assert probs == ["input `z` is not a tensor of the plan", "cannot fetch `w`: no such tensor in the plan"]
    (p,) = validate_run(plan, {"x": np.zeros(8, np.float32), "y": np.zeros(8, np.float32)}, (), None)
    assert "declares it output" in p


def test_bf16_inputs_are_uint16_bit_patterns() -> None:
    plan = _plan(tensors=[TensorSpec("x", "bf16", (4,)), TensorSpec("y", "f32", (8,), kind="output")])
    assert host_dtype("bf16") == np.uint16 and host_dtype("fp8e4m3") == np.uint8 and host_dtype("tf32") == np.float32
    assert validate_run(plan, {"x": np.zeros(4, np.uint16)}, (), None) == []
    assert validate_run(plan, {"x": np.zeros(4, np.float32)}, (), None)


def test_launch_and_plan_problems() -> None:
    bad = _plan(
        tensors=[
            TensorSpec("x", "f32", (8,)),
            TensorSpec("x", "f32", (8,)),
            TensorSpec("q", "f99", (8,)),
            TensorSpec("r", "f32", (8,), kind="weird"),
        ],
        launches=[
            KernelLaunch(
                "k",
                (0, 1, 1),
                (2048, 1, 1),
                [TensorArg("nope"), ScalarArg(2**40, "i32"), ScalarArg(1.5, "i64")],
                cubin="other",
            ),
            KernelLaunch("k", (1, 1, 1), (32, 1, 1), [ScalarArg(1, "u16"), "junk"], smem_bytes=-1),  # type: ignore[list-item]
        ],
    )
    probs = "\n".join(validate_run(bad, {"x": np.zeros(8, np.float32)}, (), Timing(reps=0)))
    for needle in [
        "declared twice", "unknown dtype `f99`", "kind `weird`", "no cubin `other`", "grid (0, 1, 1)",
        "more than 1024 threads", "no tensor `nope`", "does not fit i32", "not an integer", "unknown scalar ctype",
        "not a TensorArg", "negative dynamic shared memory", "reps >= 1",
    ]:  # fmt: skip
        assert needle in probs, needle
    assert validate_run(_plan(launches=[]), {"x": np.zeros(8, np.float32)}, (), None) == ["the plan has no launches"]


def test_tensor_map_checks() -> None:
    tensors = [TensorSpec("g", "bf16", (40, 72)), TensorSpec("o", "bf16", (2, 16, 32), kind="output")]
    good = TensorMapArg("g", "bf16", dims=(72, 40), strides=(144,), box=(32, 16))

    def problems(arg: TensorMapArg) -> str:
        plan = _plan(tensors=tensors, launches=[KernelLaunch("k", (2, 1, 1), (128, 1, 1), [arg, TensorArg("o")])])
        return "\n".join(validate_run(plan, {"g": np.zeros((40, 72), np.uint16)}, ("o",), None))

    assert problems(good) == ""
    assert "stride[1] = 140" in problems(TensorMapArg("g", "bf16", (72, 40), (140,), (32, 16)))
    assert "box[0] = 512" in problems(TensorMapArg("g", "bf16", (72, 40), (144,), (512, 16)))
    assert "not a multiple of 16" in problems(TensorMapArg("g", "bf16", (72, 40), (144,), (4, 16)))
    assert "swizzle span" in problems(TensorMapArg("g", "bf16", (72, 40), (144,), (128, 16), swizzle="64B"))
    assert "swizzle `16B`" in problems(TensorMapArg("g", "bf16", (72, 40), (144,), (32, 16), swizzle="16B"))
    assert "needs 1" in problems(TensorMapArg("g", "bf16", (72, 40), (), (32, 16)))
    assert "spans" in problems(TensorMapArg("g", "bf16", (72, 80), (144,), (32, 16)))
    assert "element size" in problems(TensorMapArg("g", "f32", (36, 40), (144,), (32, 16)))
    assert "l2_promotion" in problems(TensorMapArg("g", "bf16", (72, 40), (144,), (32, 16), l2_promotion=32))


@pytest.mark.parametrize(
    ("arg", "ctype", "value"),
    [
        (ScalarArg(-5), ctypes.c_int32, -5),
        (ScalarArg(2**32 - 1, "u32"), ctypes.c_uint32, 2**32 - 1),
        (ScalarArg(-(2**40), "i64"), ctypes.c_int64, -(2**40)),
        (ScalarArg(np.int64(7), "u64"), ctypes.c_uint64, 7),
        (ScalarArg(1.25, "f32"), ctypes.c_float, 1.25),
        (ScalarArg(3, "f64"), ctypes.c_double, 3.0),
    ],
)
def test_scalar_values(arg: ScalarArg, ctype: type, value: float) -> None:
    v = scalar_value(arg)
    assert type(v) is ctype and v.value == value


def test_scalar_errors() -> None:
    for bad in (ScalarArg(2**31), ScalarArg(-1, "u32"), ScalarArg(1.0, "i32"), ScalarArg(True), ScalarArg("1", "f32")):
        with pytest.raises(ValueError):
            scalar_value(bad)


def test_default_poison_is_all_ones() -> None:
    for dtype, n in [("f32", 10), ("bf16", 10), ("f16", 3), ("f64", 2), ("i32", 5), ("u8", 7), ("fp8e4m3", 4)]:
        spec = TensorSpec("t", dtype, (n,), kind="output")
        fill = poison_fill(spec)
        assert (fill.width, fill.value) == (8, 0xFF)
        assert fill.count == n * np.dtype(host_dtype(dtype)).itemsize
        pattern = np.full(fill.count, 0xFF, np.uint8).view(host_dtype(dtype))
        if dtype in ("f32", "f16", "f64"):
            assert np.isnan(pattern).all()
        elif dtype == "bf16":
            assert (pattern == 0xFFFF).all()  # a bf16 NaN
        elif dtype == "i32":
            assert (pattern == -1).all()


def test_explicit_poison_values() -> None:
    f = poison_fill(TensorSpec("t", "f32", (6,), kind="scratch", poison=0.0))
    assert (f.width, f.value, f.count) == (8, 0, 24)
    f = poison_fill(TensorSpec("t", "f32", (6,), kind="output", poison=1.0))
    assert (f.width, f.value, f.count) == (32, 0x3F800000, 6)
    f = poison_fill(TensorSpec("t", "bf16", (6,), kind="output", poison=1.0))
    assert (f.width, f.value, f.count) == (16, 0x3F80, 6)
    f = poison_fill(TensorSpec("t", "i32", (6,), kind="output", poison=7))
    assert (f.width, f.value, f.count) == (32, 7, 6)
    f = poison_fill(TensorSpec("t", "i64", (3,), kind="output", poison=-1))
    assert (f.width, f.value, f.count) == (8, 0xFF, 24)
    f = poison_fill(TensorSpec("t", "i64", (3,), kind="output", poison=7 * 2**32 + 7))
    assert (f.width, f.value, f.count) == (32, 7, 6)  # two equal 32-bit halves
    f = poison_fill(TensorSpec("t", "i64", (3,), kind="output", poison=5))
    assert f.width == 0 and f.pattern is not None and np.array_equal(f.pattern.view(np.int64), [5, 5, 5])
    f = poison_fill(TensorSpec("t", "f64", (3,), kind="output", poison=1.5))
    assert f.width == 0 and f.pattern is not None
    assert np.array_equal(f.pattern.view(np.float64), np.full(3, 1.5))
    with pytest.raises(ValueError):
        poison_fill(TensorSpec("t", "i32", (3,), kind="output", poison=2**40))
    with pytest.raises(ValueError):
        poison_fill(TensorSpec("t", "i32", (3,), kind="output", poison=0.5))


class _FakeTensorMap:
    def __init__(self) -> None:
        self.buf = (ctypes.c_ubyte * 128)()

    def getPtr(self) -> int:  # noqa: N802 - the cuda.bindings name
        return ctypes.addressof(self.buf)


def test_pack_params_layout() -> None:
    tmap_arg = TensorMapArg("g", "bf16", (72, 40), (144,), (32, 16))
    launch = KernelLaunch(
        "k",
        (1, 1, 1),
        (32, 1, 1),
        [tmap_arg, TensorArg("x"), ScalarArg(-3), ScalarArg(2.5, "f32"), ScalarArg(2**40, "i64")],
    )
    tm = _FakeTensorMap()
    packed = pack_params(launch, {"x": 0xDEAD0000, "g": 0x1000}, {tmap_arg: tm})
    assert packed.count == 5 and packed.address != 0
    ptrs = (ctypes.c_void_p * 5).from_address(packed.address)
    assert ptrs[0] == tm.getPtr()
    assert ctypes.c_uint64.from_address(ptrs[1]).value == 0xDEAD0000
    assert ctypes.c_int32.from_address(ptrs[2]).value == -3
    assert ctypes.c_float.from_address(ptrs[3]).value == 2.5
    assert ctypes.c_int64.from_address(ptrs[4]).value == 2**40
    assert pack_params(KernelLaunch("k", (1, 1, 1), (1, 1, 1), []), {}, {}).address == 0
    with pytest.raises(PlanError):
        pack_params(KernelLaunch("k", (1, 1, 1), (1, 1, 1), [object()]), {}, {})  # type: ignore[list-item]


@pytest.mark.skipif(driver_status()[0], reason="would load libcuda into the test process")
def test_tensor_map_encoding_call_is_well_typed() -> None:
    """Without libcuda the call gets through cuda.bindings' argument conversion and fails only at
    loading the driver: the argument types are right (a wrong one raises TypeError first)."""
    from cuda.bindings import driver as cu

    for swizzle, l2 in [("none", 256), ("128B", 0), ("64B", 64), ("32B", 128)]:
        arg = TensorMapArg("g", "bf16", (64, 40), (128,), (32, 16), swizzle=swizzle, l2_promotion=l2)
        with pytest.raises(Exception) as info:
            encode_tensor_map(cu, arg, 0x10000)
        assert not isinstance(info.value, TypeError), info.value
        assert "cuda" in str(info.value).lower()
