"""Hardware targets: the typed record a target plugin registers.

The core holds no hardware facts of its own. A target plugin (``cake-targets-nvidia`` for the built-in
parts) registers :class:`Target` records; verifier rules, the lowering, the cost models and the runtime
read every limit from them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs


class Feature(enum.StrEnum):
    """Hardware features a schedule may rely on. A target lists exactly the ones its architecture string has."""

    CP_ASYNC = "cp.async"  # sm_80+: asynchronous global->shared copies
    LDMATRIX = "ldmatrix"  # sm_75+: warp-cooperative shared->register matrix loads
    MMA_SYNC = "mma.sync"  # sm_80+ bf16/fp16 m16n8k16 warp-level tensor-core MMA
    STMATRIX = "stmatrix"  # sm_90+: warp-cooperative register->shared matrix stores
    TMA = "tma"  # sm_90+: bulk tensor copies through tensor maps (cp.async.bulk.tensor)
    MBARRIER_TX = "mbarrier.tx"  # sm_90+: mbarrier transaction counts (expect-tx / complete-tx)
    CLUSTERS = "clusters"  # sm_90+: thread-block clusters and distributed shared memory
    WGMMA = "wgmma"  # sm_90a only: warpgroup MMA (wgmma.mma_async)
    SETMAXNREG = "setmaxnreg"  # sm_90a, sm_100a: per-warpgroup register reallocation
    TCGEN05 = "tcgen05"  # sm_100a: fifth-generation tensor-core instructions
    TMEM = "tmem"  # sm_100a: tensor memory
    FP8 = "fp8"  # sm_89+: e4m3/e5m2 tensor-core inputs


@attrs.frozen
class Ceiling:
    """A throughput figure measured on a real part, kept beside the datasheet one."""

    metric: str  # e.g. "bf16_tflops", "copy_gbs"
    value: float
    unit: str
    date: str  # ISO date of the measurement
    how: str  # what was measured and with which tool


def _positive(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if value <= 0:
        raise ValueError(f"{attribute.name} must be positive, got {value!r}")


@attrs.frozen(kw_only=True)
class Target:
    """One GPU part as data. Byte counts are bytes, bandwidths GB/s (10^9 B/s), throughputs TFLOP/s dense."""

    name: str  # the id users type: `--target h200`
    product: str  # e.g. "NVIDIA H200 SXM 141GB"
    vendor: str = "nvidia"
    architecture: str  # "ampere", "ada", "hopper", "blackwell"
    compute_capability: tuple[int, int] = attrs.field(converter=tuple)
    nvrtc_arch: str  # what NVRTC's --gpu-architecture takes: "sm_80", "sm_90a", ...
    sm_count: int = attrs.field(validator=_positive)
    boost_clock_mhz: int = attrs.field(validator=_positive)
    memory_clock_mhz: int = attrs.field(validator=_positive)
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_threads_per_sm: int = attrs.field(validator=_positive)
    max_ctas_per_sm: int = attrs.field(validator=_positive)
    regs_per_sm: int = 65536
    regs_per_block: int = 65536
    regs_per_thread: int = 255
    smem_per_block_default: int = 48 * 1024  # static shared memory and the dynamic default
    smem_per_block_optin: int = attrs.field(validator=_positive)  # the opt-in maximum per block
    smem_per_sm: int = attrs.field(validator=_positive)
    smem_reserved_per_block: int = 1024  # the runtime's own reservation per resident CTA (sm_80+)
    l2_bytes: int = attrs.field(validator=_positive)
    dram_bytes: int = attrs.field(validator=_positive)
    dram_bandwidth_gbs: float = attrs.field(validator=_positive)
    tensor_tflops: Mapping[str, float] = attrs.field(converter=lambda m: dict(sorted(m.items())))
    fp32_tflops: float = attrs.field(validator=_positive)
    features: frozenset[Feature] = attrs.field(converter=lambda fs: frozenset(Feature(f) for f in fs))
    measured: tuple[Ceiling, ...] = attrs.field(default=(), converter=tuple)
    sources: tuple[str, ...] = attrs.field(converter=tuple)
    data_version: str

    @property
    def sm(self) -> int:
        """Compute capability as one number: 90 for sm_90a."""
        major, minor = self.compute_capability
        return major * 10 + minor

    def has(self, feature: Feature | str) -> bool:
        return Feature(feature) in self.features

    def ceiling(self, metric: str) -> float | None:
        """The measured figure for ``metric`` if this target carries one, else ``None``."""
        for c in self.measured:
            if c.metric == metric:
                return c.value
        return None
