"""The CUDA executor's logic against fake_driver.py (host memory, Python kernels, type-checked calls).

This runs every path of :class:`~cake_core.runtime.executor.CudaExecutor` that the GPU tests run —
allocation, upload, poison before every run, argument packing (pointers, scalars, tensor maps),
the dynamic shared memory opt-in, timing with flush and events, faults and errors, cleanup — so
that a mistake in how it drives the driver shows here, without a GPU.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from cake_core.hostdata import random_values
from cake_core.runtime.executor import CudaExecutor
from cake_core.runtime.plan import KernelLaunch, Plan, ScalarArg, TensorArg, TensorMapArg, TensorSpec, Timing
from cake_core.runtime.protocol import BackendStartError, RunRequest


@pytest.fixture
def drv(fake_driver: ModuleType):  # noqa: ANN201
    return fake_driver.FakeDriver()


@pytest.fixture
def ex(drv) -> CudaExecutor:  # noqa: ANN001
    return CudaExecutor(0, driver=drv)


def _vadd(fd: ModuleType, n: int, label: str = "vadd") -> Plan:
    return Plan(
        label=label,
        cubins={"main": fd.fake_cubin("vadd")},
        tensors=[
            TensorSpec("a", "f32", (n,)),
            TensorSpec("b", "f32", (n,)),
            TensorSpec("c", "f32", (n,), kind="output"),
        ],
        launches=[
            KernelLaunch(
                "vadd",
                (max(1, (n + 255) // 256), 1, 1),
                (256, 1, 1),
                [TensorArg("a"), TensorArg("b"), TensorArg("c"), ScalarArg(n)],
            )
        ],
    )


def _inputs(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"a": rng.standard_normal(n, dtype=np.float32), "b": rng.standard_normal(n, dtype=np.float32)}


def test_device_info(ex: CudaExecutor) -> None:
    info = ex.device_info()
    assert info.name == "Fake H200" and info.compute_capability == (9, 0) and info.arch == "sm_90"
    assert info.sm_count == 132 and info.max_shared_per_block_optin == 232448 and info.l2_bytes == 50 << 20
    assert info.driver_version == 13000 and info.pci_bus_id == "0000:19:00.0"
    assert info.attributes["CLOCK_RATE"] == 1980000
    assert "MEMORY_CLOCK_RATE" not in info.attributes  # optional, and this "driver" refuses it


def test_start_failure(fake_driver: ModuleType) -> None:
    with pytest.raises(BackendStartError, match="cuInit failed: CUDA_ERROR_NO_DEVICE"):
        CudaExecutor(0, driver=fake_driver.FakeDriver(init_error=fake_driver.CUresult.CUDA_ERROR_NO_DEVICE))
    with pytest.raises(BackendStartError, match="no CUDA device 3"):
        CudaExecutor(3, driver=fake_driver.FakeDriver())


def test_vector_add_and_cleanup(ex: CudaExecutor, drv, fake_driver: ModuleType) -> None:  # noqa: ANN001
    inputs = _inputs(1000)
    reply = ex.run(RunRequest(_vadd(fake_driver, 1000), inputs, ("c",)))
    assert reply.status == "ok", reply.error
    np.testing.assert_array_equal(reply.outputs["c"], inputs["a"] + inputs["b"])
    assert reply.functions["vadd"]["registers"] == 16
    assert drv.memory == {}  # everything freed
    assert drv.launches == ["vadd"]
    assert drv.calls.index("memset8") < drv.calls.index("DtoH")


def test_poison_before_every_run(ex: CudaExecutor, fake_driver: ModuleType) -> None:
    n = 100

    def plan(count: int) -> Plan:
        return Plan(
            label="partial",
            cubins={"main": fake_driver.fake_cubin("partial")},
            tensors=[
                TensorSpec("y", "f32", (n,), kind="output"),
                TensorSpec("z", "i32", (n,), kind="output"),
                TensorSpec("h", "bf16", (n,), kind="output"),
                TensorSpec("e", "i32", (n,), kind="output", poison=7),
            ],
            launches=[
                KernelLaunch(
                    "partial",
                    (1, 1, 1),
                    (128, 1, 1),
                    [TensorArg("y"), TensorArg("z"), TensorArg("h"), TensorArg("e"), ScalarArg(count)],
                )
            ],
        )

    r = ex.run(RunRequest(plan(50), {}, ("y", "z", "h", "e")))
    assert r.status == "ok", r.error
    assert np.isnan(r.outputs["y"][50:]).all() and (r.outputs["z"][50:] == -1).all()
    assert (r.outputs["h"][50:] == 0xFFFF).all() and (r.outputs["e"][50:] == 7).all()
    np.testing.assert_array_equal(r.outputs["e"][:50], -np.arange(50))


def test_scratch_two_launches_and_scalars(ex: CudaExecutor, fake_driver: ModuleType) -> None:
    n = 64
    plan = Plan(
        label="two",
        cubins={"k": fake_driver.fake_cubin("scale2", "plus1"), "s": fake_driver.fake_cubin("scalars")},
        tensors=[
            TensorSpec("a", "f32", (n,)),
            TensorSpec("s", "f32", (n,), kind="scratch"),
            TensorSpec("o", "f32", (n,), kind="output"),
            TensorSpec("oa", "i64", (1,), kind="output"),
            TensorSpec("ob", "u32", (1,), kind="output"),
            TensorSpec("oc", "f32", (1,), kind="output"),
            TensorSpec("od", "f64", (1,), kind="output"),
        ],
        launches=[
            KernelLaunch("scale2", (1, 1, 1), (64, 1, 1), [TensorArg("a"), TensorArg("s"), ScalarArg(n)], cubin="k"),
            KernelLaunch("plus1", (1, 1, 1), (64, 1, 1), [TensorArg("s"), TensorArg("o"), ScalarArg(n)], cubin="k"),
            KernelLaunch(
                "scalars",
                (1, 1, 1),
                (32, 1, 1),
                [
                    ScalarArg(-(2**40) + 3, "i64"),
                    ScalarArg(2**32 - 2, "u32"),
                    ScalarArg(1.25, "f32"),
                    ScalarArg(np.pi, "f64"),
                    TensorArg("oa"),
                    TensorArg("ob"),
                    TensorArg("oc"),
                    TensorArg("od"),
                ],
                cubin="s",
            ),
        ],
    )
    a = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    r = ex.run(RunRequest(plan, {"a": a}, ("o", "s", "oa", "ob", "oc", "od")))
    assert r.status == "ok", r.error
    np.testing.assert_array_equal(r.outputs["o"], a * np.float32(2) + np.float32(1))
    assert int(r.outputs["oa"][0]) == -(2**40) + 3 and int(r.outputs["ob"][0]) == 2**32 - 2
    assert float(r.outputs["oc"][0]) == 1.25 and float(r.outputs["od"][0]) == np.pi


def test_dynamic_shared_memory_opt_in(ex: CudaExecutor, drv, fake_driver: ModuleType) -> None:  # noqa: ANN001
    per_block, blocks = 25_000, 3

    def plan(smem: int) -> Plan:
        return Plan(
            label="smem",
            cubins={"main": fake_driver.fake_cubin("smem_reverse")},
            tensors=[
                TensorSpec("x", "f32", (per_block * blocks,)),
                TensorSpec("y", "f32", (per_block * blocks,), kind="output"),
            ],
            launches=[
                KernelLaunch(
                    "smem_reverse",
                    (blocks, 1, 1),
                    (256, 1, 1),
                    [TensorArg("x"), TensorArg("y"), ScalarArg(per_block)],
                    smem_bytes=smem,
                )
            ],
        )

    x = np.arange(per_block * blocks, dtype=np.float32)
    r = ex.run(RunRequest(plan(100_000), {"x": x}, ("y",)))
    assert r.status == "ok", r.error
    np.testing.assert_array_equal(r.outputs["y"], x.reshape(blocks, per_block)[:, ::-1].reshape(-1))
    assert r.functions["smem_reverse"]["max_dynamic_shared_bytes"] == 100_000
    # 48 KiB minus the kernel's 16 static bytes is still the default limit: 49,150 needs the opt-in too
    assert ex.run(RunRequest(plan(49_150), {"x": x}, ("y",))).status == "ok"
    too_much = ex.run(RunRequest(plan(232_448), {"x": x}, ("y",)))
    assert too_much.status == "error" and "232448 B per block" in (too_much.error or "")
    assert drv.memory == {}


def test_launch_error_is_not_a_fault(ex: CudaExecutor, drv, fake_driver: ModuleType) -> None:  # noqa: ANN001
    plan = Plan(
        label="bounded",
        cubins={"main": fake_driver.fake_cubin("bounded")},
        tensors=[TensorSpec("y", "f32", (256,), kind="output")],
        launches=[KernelLaunch("bounded", (1, 1, 1), (256, 1, 1), [TensorArg("y")])],
    )
    r = ex.run(RunRequest(plan, {}, ("y",)))
    assert r.status == "error" and r.cuda_error == "CUDA_ERROR_INVALID_VALUE"
    assert "cuLaunchKernel(launch 0, `bounded`)" in (r.error or "")
    assert drv.memory == {}
    assert ex.run(RunRequest(_vadd(fake_driver, 10), _inputs(10), ("c",))).status == "ok"


def test_fault_is_sticky(ex: CudaExecutor, drv, fake_driver: ModuleType) -> None:  # noqa: ANN001
    plan = Plan(
        label="wild",
        cubins={"main": fake_driver.fake_cubin("wild_write")},
        tensors=[TensorSpec("y", "f32", (16,), kind="output")],
        launches=[KernelLaunch("wild_write", (1, 1, 1), (1, 1, 1), [TensorArg("y"), ScalarArg(1 << 40, "i64")])],
    )
    r = ex.run(RunRequest(plan, {}, ("y",)))
    assert r.status == "fault" and r.cuda_error == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "after launch 0, `wild_write`" in (r.error or "") and "fake text" in (r.error or "")


def test_wrong_arch_cubin(ex: CudaExecutor, fake_driver: ModuleType) -> None:
    plan = _vadd(fake_driver, 10)
    plan = Plan(plan.label, {"main": fake_driver.fake_cubin("vadd", arch="sm_80")}, plan.tensors, plan.launches)
    r = ex.run(RunRequest(plan, _inputs(10), ("c",)))
    assert r.status == "error" and r.cuda_error == "CUDA_ERROR_NO_BINARY_FOR_GPU"
    assert "not compiled for this GPU (sm_90)" in (r.error or "")


def test_missing_function_and_bad_plan(ex: CudaExecutor, fake_driver: ModuleType) -> None:
    plan = _vadd(fake_driver, 10)
    plan = Plan(plan.label, {"main": fake_driver.fake_cubin("other")}, plan.tensors, plan.launches)
    r = ex.run(RunRequest(plan, _inputs(10), ("c",)))
    assert r.status == "error" and r.cuda_error == "CUDA_ERROR_NOT_FOUND" and "`vadd`" in (r.error or "")
    r = ex.run(RunRequest(_vadd(fake_driver, 10), {}, ("c",)))
    assert r.status == "error" and "input `a` is missing" in (r.error or "")


def test_timing(ex: CudaExecutor, drv, fake_driver: ModuleType) -> None:  # noqa: ANN001
    inputs = _inputs(1000)
    timing = Timing(warmup=2, reps=7, flush_bytes=1 << 20)
    r = ex.run(RunRequest(_vadd(fake_driver, 1000), inputs, ("c",), timing=timing))
    assert r.status == "ok", r.error
    assert r.samples_ms == (0.25,) * 7
    assert drv.launches == ["vadd"] * 9
    # poison before every run (2 warm-up + 7 timed), the L2 flush only before the timed ones
    assert drv.calls.count("memset8") == 9 and drv.calls.count("memset32") == 7
    assert drv.calls.count("record") == 14
    assert any("smaller than twice the L2" in n for n in r.notes)
    np.testing.assert_array_equal(r.outputs["c"], inputs["a"] + inputs["b"])
    assert drv.events_live == set()
    assert len(drv.memory) == 1  # only the executor's cached flush buffer remains
    # each timed region holds only the launches; poison and flush come before the start event
    assert drv.calls[-6:] == ["memset8", "memset32", "record", "launch:vadd", "record", "DtoH"]


def test_tensor_map_argument(ex: CudaExecutor, fake_driver: ModuleType) -> None:
    rows, cols, w, h = 40, 72, 32, 16
    g = random_values(np.random.default_rng(2), (rows, cols), "bf16")
    tmap = TensorMapArg("g", "bf16", dims=(cols, rows), strides=(cols * 2,), box=(w, h))
    plan = Plan(
        label="tma",
        cubins={"main": fake_driver.fake_cubin("tma_box", arch="sm_90a")},
        tensors=[TensorSpec("g", "bf16", (rows, cols)), TensorSpec("out", "bf16", (2, h, w), kind="output")],
        launches=[
            KernelLaunch(
                "tma_box", (2, 1, 1), (128, 1, 1), [tmap, TensorArg("out"), *(ScalarArg(c) for c in (16, 8, 48, 32))]
            )
        ],
    )
    r = ex.run(RunRequest(plan, {"g": g}, ("out",)))
    assert r.status == "ok", r.error
    np.testing.assert_array_equal(r.outputs["out"][0], g[8:24, 16:48])
    expect = np.zeros((h, w), np.uint16)
    expect[:8, :24] = g[32:40, 48:72]
    np.testing.assert_array_equal(r.outputs["out"][1], expect)


def test_zero_sized_tensor(ex: CudaExecutor, fake_driver: ModuleType) -> None:
    r = ex.run(
        RunRequest(_vadd(fake_driver, 0, "empty"), {"a": np.zeros(0, np.float32), "b": np.zeros(0, np.float32)}, ("c",))
    )
    assert r.status == "ok", r.error
    assert r.outputs["c"].shape == (0,)
