"""Launch plans: everything a GPU worker needs to run compiled kernels, as plain picklable data.

A plan names device tensors (inputs, outputs, scratch) and an ordered list of kernel launches over
them. The lowering produces plans for Cake programs; problems build plans for their CUDA references.
Nothing here touches CUDA: plans cross into spawned worker processes, which do.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class TensorSpec:
    """A device tensor of a plan.

    ``kind`` is ``input`` (copied from the host before each run), ``output`` (poisoned with
    ``poison`` before each run, copied back after) or ``scratch`` (allocated, poisoned, not returned).
    ``dtype`` is a Cake dtype name (``bf16`` is stored as 16-bit patterns).
    """

    name: str
    dtype: str
    shape: tuple[int, ...] = attrs.field(converter=tuple)
    kind: str = "input"
    poison: float | int | None = None  # None: the dtype's default poison (NaN for floats, -1 ints)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@attrs.frozen
class TensorArg:
    """Pass the device pointer of tensor ``name``."""

    name: str


@attrs.frozen
class ScalarArg:
    """Pass a scalar by value; ``ctype`` is ``i32``, ``u32``, ``i64`` or ``f32``."""

    value: int | float
    ctype: str = "i32"


@attrs.frozen
class TensorMapArg:
    """Pass a TMA tensor map (``CUtensorMap``, 128 bytes, by value) over tensor ``name``.

    Sizes are listed innermost dimension first, as ``cuTensorMapEncodeTiled`` takes them:
    ``dims`` (elements), ``strides`` (bytes, for dimensions 1.. only), ``box`` (elements).
    ``swizzle`` is ``none``, ``32B``, ``64B`` or ``128B``. Out-of-bounds elements are zero-filled.
    """

    name: str
    dtype: str
    dims: tuple[int, ...] = attrs.field(converter=tuple)
    strides: tuple[int, ...] = attrs.field(converter=tuple)
    box: tuple[int, ...] = attrs.field(converter=tuple)
    swizzle: str = "none"
    l2_promotion: int = 256  # bytes: 0, 64, 128 or 256


Arg = TensorArg | ScalarArg | TensorMapArg


@attrs.frozen
class KernelLaunch:
    function: str  # the extern "C" kernel name in the cubin
    grid: tuple[int, int, int] = attrs.field(converter=tuple)
    block: tuple[int, int, int] = attrs.field(converter=tuple)
    args: tuple[Arg, ...] = attrs.field(converter=tuple)
    smem_bytes: int = 0  # dynamic shared memory; above 48 KiB the worker raises the kernel's limit
    cubin: str = "main"  # which of the plan's cubins holds the function


@attrs.frozen
class Plan:
    """Tensors and an ordered sequence of launches: one timed unit of work."""

    label: str
    cubins: dict[str, bytes] = attrs.field(converter=dict)
    tensors: tuple[TensorSpec, ...] = attrs.field(converter=tuple)
    launches: tuple[KernelLaunch, ...] = attrs.field(converter=tuple)

    def tensor(self, name: str) -> TensorSpec:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)


@attrs.frozen
class Timing:
    """How to time a plan: CUDA events around the whole launch sequence, warm-up first, the L2
    flushed (a write over a buffer of ``flush_bytes``, outside the timed region) before every
    repetition, median of ``reps``.

    ``budget_ms`` bounds the timed repetitions of a slow kernel: the first warm-up call is timed, and
    the repetitions are cut to what fits the budget at that pace, never below ``min_reps`` (a 200 ms
    kernel gets 5 repetitions within a 1000 ms budget, a 1 ms kernel keeps all 50); the warm-ups that
    remain are cut to a tenth of that. ``None`` times every repetition whatever it costs.
    """

    warmup: int = 5
    reps: int = 50
    flush_l2: bool = True
    flush_bytes: int = 256 * 1024 * 1024
    budget_ms: float | None = None
    min_reps: int = 5

    def bounded(self, first_ms: float) -> tuple[int, int]:
        """(warm-ups still to run, timed repetitions) once the first warm-up call took ``first_ms``."""
        if self.budget_ms is None:
            return max(self.warmup - 1, 0), self.reps
        fits = int(self.budget_ms // max(first_ms, 1e-3))
        reps = min(self.reps, max(fits, self.min_reps))
        return min(max(self.warmup - 1, 0), fits // 10), reps
