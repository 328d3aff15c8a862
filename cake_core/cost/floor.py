"""The floor: the least time any implementation of a problem cell can take on a target.

``floor_ms`` is the larger of two times no kernel can beat: moving the problem's ``min_bytes`` at the
target's DRAM bandwidth, and doing its ``flops`` at the target's tensor-core peak for the cell's element
type. Each rate is the higher of the datasheet figure and any measured ceiling the target carries, so the
floor stays a lower bound (a measured median below it is a measurement to distrust, not a fast kernel);
where the target has no tensor rate for the element type, the fastest rate it lists stands in. Stage 3
quarantines a candidate whose median beats it (:func:`cake_core.loop.benchmark.bench_candidate`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cake_core.problems.problem import Problem
    from cake_core.target import Target

#: the tensor-rate key of a target record (``tensor_tflops``) and its measured metric, by Cake element type
TENSOR_RATE_KEYS = {"bf16": ("bf16", "bf16_tflops"), "f16": ("fp16", "fp16_tflops"), "f32": ("tf32", "tf32_tflops"),
                    "tf32": ("tf32", "tf32_tflops"), "fp8e4m3": ("fp8", "fp8_tflops"),
                    "fp8e5m2": ("fp8", "fp8_tflops")}  # fmt: skip


def peak_tflops(target: Target, dtype: str) -> float:
    """The most FLOP/s (in TFLOP/s, dense) ``target`` can do on ``dtype`` operands: its tensor rate for the
    type (datasheet or measured, whichever is higher), else the fastest rate it lists."""
    key, metric = TENSOR_RATE_KEYS.get(dtype, (dtype, f"{dtype}_tflops"))
    rates = [r for r in (target.tensor_tflops.get(key), target.ceiling(metric)) if r]
    if not rates:
        rates = [*target.tensor_tflops.values(), target.fp32_tflops]
    return max(rates)


def peak_gbs(target: Target) -> float:
    """The most bytes per second (GB/s) ``target``'s DRAM moves: datasheet or measured, whichever is higher."""
    return max(target.dram_bandwidth_gbs, target.ceiling("copy_gbs") or 0.0)


def floor_ms(problem: Problem, shape: Mapping[str, int], dtype: str, target: Target) -> float:
    """The floor (see the module docstring) of ``problem`` at ``shape`` and ``dtype`` on ``target``, in ms."""
    memory = problem.min_bytes(shape, dtype) / (peak_gbs(target) * 1e9)
    compute = problem.flops(shape) / (peak_tflops(target, dtype) * 1e12)
    return max(memory, compute) * 1e3
