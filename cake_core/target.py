"""Hardware targets: the typed record a target plugin registers.

The core holds no hardware facts of its own. A target plugin (``cake-targets-nvidia`` for the built-in
parts) registers :class:`Target` records; verifier rules, the lowering, the cost models and the runtime
read every limit from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import attrs

from cake_core.names import OpenName


class Feature(OpenName):
    """The name of a hardware feature a schedule may rely on (``"tma"``, ``"wgmma"``).

    Features are names that plugins declare (:class:`TargetFeature`, through ``cake_register_features``),
    not a closed list: the core declares none of them. The constants spell the names the core's own
    primitives and rules use; ``cake-targets-nvidia`` declares them and which architectures have them.
    """

    __slots__ = ()

    CP_ASYNC: ClassVar[Feature]
    LDMATRIX: ClassVar[Feature]
    MMA_SYNC: ClassVar[Feature]
    STMATRIX: ClassVar[Feature]
    TMA: ClassVar[Feature]
    MBARRIER_TX: ClassVar[Feature]
    CLUSTERS: ClassVar[Feature]
    WGMMA: ClassVar[Feature]
    SETMAXNREG: ClassVar[Feature]
    FP8: ClassVar[Feature]


Feature.CP_ASYNC = Feature("cp.async")
Feature.LDMATRIX = Feature("ldmatrix")
Feature.MMA_SYNC = Feature("mma.sync")
Feature.STMATRIX = Feature("stmatrix")
Feature.TMA = Feature("tma")
Feature.MBARRIER_TX = Feature("mbarrier.tx")
Feature.CLUSTERS = Feature("clusters")
Feature.WGMMA = Feature("wgmma")
Feature.SETMAXNREG = Feature("setmaxnreg")
Feature.FP8 = Feature("fp8")


@attrs.frozen
class TargetFeature:
    """A plugin's declaration of one feature: its name, and what a target that has it offers."""

    name: Feature = attrs.field(converter=Feature)
    doc: str


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
