"""NVIDIA hardware targets for Cake: Ampere, Ada, Hopper and Blackwell parts as data.

The figures live in ``targets.toml`` beside this module (read with :mod:`tomllib`); this module turns
them into :class:`cake_core.target.Target` records and registers them through the
``cake_register_targets`` hook, and declares the NVIDIA features (:data:`FEATURES`) through
``cake_register_features``. Two things are derived here rather than typed per target:

* the feature set, from :data:`FEATURES_BY_ARCH`, keyed by the NVRTC architecture string;
* the compute capability and the per-SM / per-block limits, from the architecture string and the
  data file's ``[compute_capabilities."M.m"]`` rows.

A malformed data file is a bug in this package, reported as :class:`TargetDataError`.
"""

from __future__ import annotations

import datetime
import importlib.resources
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cake_core.errors import CakeInternalError
from cake_core.hookspecs import hookimpl
from cake_core.target import Ceiling, Feature, Target, TargetFeature

__all__ = [
    "FEATURES",
    "FEATURES_BY_ARCH",
    "TargetDataError",
    "cake_register_features",
    "cake_register_targets",
    "compute_capability_of",
    "features_for",
    "load_targets",
]

VENDOR = "nvidia"
DATA_FILE = "targets.toml"

# ---------------------------------------------------------------------------------------------------
# Features per NVRTC architecture string
# ---------------------------------------------------------------------------------------------------

#: Blackwell's features: names only the plugins that use them spell (the core holds no Blackwell names)
TCGEN05 = Feature("tcgen05")
TMEM = Feature("tmem")

#: every feature an NVIDIA architecture string may offer, declared through ``cake_register_features``
FEATURES: tuple[TargetFeature, ...] = (
    TargetFeature(Feature.CP_ASYNC, "sm_80+: asynchronous global->shared copies"),
    TargetFeature(Feature.LDMATRIX, "sm_75+: warp-cooperative shared->register matrix loads"),
    TargetFeature(Feature.MMA_SYNC, "sm_80+: bf16/fp16 m16n8k16 warp-level tensor-core MMA"),
    TargetFeature(Feature.STMATRIX, "sm_90+: warp-cooperative register->shared matrix stores"),
    TargetFeature(Feature.TMA, "sm_90+: bulk tensor copies through tensor maps (cp.async.bulk.tensor)"),
    TargetFeature(Feature.MBARRIER_TX, "sm_90+: mbarrier transaction counts (expect-tx / complete-tx)"),
    TargetFeature(Feature.CLUSTERS, "sm_90+: thread-block clusters and distributed shared memory"),
    TargetFeature(Feature.WGMMA, "sm_90a only: warpgroup MMA (wgmma.mma_async)"),
    TargetFeature(Feature.SETMAXNREG, "sm_90a, sm_100a: per-warpgroup register reallocation"),
    TargetFeature(TCGEN05, "sm_100a: fifth-generation tensor-core instructions"),
    TargetFeature(TMEM, "sm_100a: tensor memory"),
    TargetFeature(Feature.FP8, "sm_89+: e4m3/e5m2 tensor-core inputs"),
)

_F = Feature

#: What each NVRTC ``--gpu-architecture`` string offers, row by row. The ``a`` suffix matters: plain
#: ``sm_90`` has TMA, mbarrier transaction counts and clusters, but NVRTC rejects ``wgmma`` and
#: ``setmaxnreg`` unless the target is ``sm_90a``. ``wgmma`` exists for ``sm_90a`` only: ``sm_100a``
#: replaces it with ``tcgen05`` and tensor memory. No target uses ``sm_90``; its row keeps the rule explicit.
FEATURES_BY_ARCH: Mapping[str, frozenset[Feature]] = MappingProxyType(
    {
        "sm_80": frozenset({_F.CP_ASYNC, _F.LDMATRIX, _F.MMA_SYNC}),
        "sm_86": frozenset({_F.CP_ASYNC, _F.LDMATRIX, _F.MMA_SYNC}),
        "sm_89": frozenset({_F.CP_ASYNC, _F.LDMATRIX, _F.MMA_SYNC, _F.FP8}),
        "sm_90": frozenset(
            {
                _F.CP_ASYNC, _F.LDMATRIX, _F.MMA_SYNC, _F.FP8,
                _F.STMATRIX, _F.TMA, _F.MBARRIER_TX, _F.CLUSTERS,
            }
        ),
        "sm_90a": frozenset(
            {
                _F.CP_ASYNC, _F.LDMATRIX, _F.MMA_SYNC, _F.FP8,
                _F.STMATRIX, _F.TMA, _F.MBARRIER_TX, _F.CLUSTERS,
                _F.WGMMA, _F.SETMAXNREG,
            }
        ),
        "sm_100a": frozenset(
            {
                _F.CP_ASYNC, _F.LDMATRIX, _F.MMA_SYNC, _F.FP8,
                _F.STMATRIX, _F.TMA, _F.MBARRIER_TX, _F.CLUSTERS,
                _F.SETMAXNREG, TCGEN05, TMEM,
            }
        ),
    }
)  # fmt: skip

_ARCH_RE = re.compile(r"sm_(?P<major>[1-9][0-9]*)(?P<minor>[0-9])a?")


class TargetDataError(CakeInternalError):
    """The bundled target data is malformed: a bug in cake-targets-nvidia, not the user's input."""


def features_for(nvrtc_arch: str) -> frozenset[Feature]:
    """The feature set of an NVRTC architecture string, e.g. ``"sm_90a"``."""
    try:
        return FEATURES_BY_ARCH[nvrtc_arch]
    except KeyError:
        known = ", ".join(FEATURES_BY_ARCH)
        raise ValueError(f"unknown NVRTC architecture `{nvrtc_arch}` (known: {known})") from None


def compute_capability_of(nvrtc_arch: str) -> tuple[int, int]:
    """The compute capability an architecture string compiles for: ``"sm_100a"`` -> ``(10, 0)``."""
    m = _ARCH_RE.fullmatch(nvrtc_arch)
    if m is None:
        raise ValueError(f"`{nvrtc_arch}` is not an NVRTC architecture string like `sm_90a`")
    return int(m["major"]), int(m["minor"])


# ---------------------------------------------------------------------------------------------------
# The data file
# ---------------------------------------------------------------------------------------------------

# Target fields each kind of table supplies, with the TOML type each must have. Every other Target
# field is derived (see DERIVED_FIELDS); the package's tests check that the three sets cover Target.
TARGET_FIELDS: Mapping[str, type] = MappingProxyType(
    {
        "product": str,
        "nvrtc_arch": str,
        "sm_count": int,
        "boost_clock_mhz": int,
        "memory_clock_mhz": int,
        "l2_bytes": int,
        "dram_bytes": int,
        "dram_bandwidth_gbs": float,
        "tensor_tflops": dict,
        "fp32_tflops": float,
    }
)
CAPABILITY_FIELDS: Mapping[str, type] = MappingProxyType(
    {
        "architecture": str,
        "warp_size": int,
        "max_threads_per_block": int,
        "max_threads_per_sm": int,
        "max_ctas_per_sm": int,
        "regs_per_sm": int,
        "regs_per_block": int,
        "regs_per_thread": int,
        "smem_per_block_default": int,
        "smem_per_block_optin": int,
        "smem_per_sm": int,
        "smem_reserved_per_block": int,
    }
)
DERIVED_FIELDS = frozenset(
    {"name", "vendor", "compute_capability", "features", "measured", "sources", "data_version"}
)
CEILING_FIELDS = ("metric", "value", "unit", "date", "how")

#: Tensor-core dtypes every target lists; ``fp8`` is listed exactly where the architecture has it.
TENSOR_DTYPES = frozenset({"fp16", "bf16", "tf32"})


def load_targets(path: Path | None = None) -> tuple[Target, ...]:
    """Parse a targets file (the bundled ``targets.toml`` by default) into Target records, in file order."""
    if path is None:
        resource = importlib.resources.files(__name__).joinpath(DATA_FILE)
        origin, text = f"{__name__}/{DATA_FILE}", resource.read_text(encoding="utf-8")
    else:
        origin, text = str(path), path.read_text(encoding="utf-8")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TargetDataError(f"{origin}: not valid TOML: {exc}") from exc
    return _Parser(origin, doc).targets()


class _Parser:
    """One pass over a parsed data file; every error names the file and the table it is in."""

    def __init__(self, origin: str, doc: Mapping[str, Any]) -> None:
        self.origin = origin
        self.doc = doc

    def fail(self, where: str, message: str) -> TargetDataError:
        return TargetDataError(f"{self.origin}: {where}: {message}")

    def targets(self) -> tuple[Target, ...]:
        unknown = set(self.doc) - {"data_version", "compute_capabilities", "targets", "sources"}
        if unknown:
            raise self.fail("top level", f"unknown keys {sorted(unknown)}")
        version = self.doc.get("data_version")
        if not isinstance(version, str) or not version:
            raise self.fail("top level", "`data_version` must be a non-empty string")
        sources = self._table("sources", self.doc.get("sources"))
        for key, text in sources.items():
            if not isinstance(text, str) or not text:
                raise self.fail(f"sources.{key}", "must be a non-empty string")
        capabilities = self._table("compute_capabilities", self.doc.get("compute_capabilities"))
        targets = self._table("targets", self.doc.get("targets"))
        if not targets:
            raise self.fail("targets", "no targets")
        return tuple(
            self._target(name, self._table(f"targets.{name}", table), version, sources, capabilities)
            for name, table in targets.items()
        )

    def _table(self, where: str, value: object) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, "missing, or not a table")
        return value

    def _target(
        self,
        name: str,
        table: Mapping[str, Any],
        version: str,
        sources: Mapping[str, str],
        capabilities: Mapping[str, Any],
    ) -> Target:
        where = f"targets.{name}"
        given = dict(table)
        source_keys = given.pop("sources", None)
        ceilings = given.pop("measured", [])
        fields = self._fields(where, given, TARGET_FIELDS)

        arch = fields["nvrtc_arch"]
        try:
            features = features_for(arch)
            major, minor = compute_capability_of(arch)
        except ValueError as exc:
            raise self.fail(where, str(exc)) from None
        cc_key = f"{major}.{minor}"
        cc_where = f'compute_capabilities."{cc_key}"'
        cc_row = dict(self._table(cc_where, capabilities.get(cc_key)))
        cc_source_keys = cc_row.pop("sources", None)
        fields.update(self._fields(cc_where, cc_row, CAPABILITY_FIELDS))

        fields["tensor_tflops"] = self._tensor_tflops(where, fields["tensor_tflops"], features)
        try:
            return Target(
                name=name,
                vendor=VENDOR,
                compute_capability=(major, minor),
                features=features,
                measured=self._ceilings(where, ceilings),
                sources=self._sources(where, source_keys, sources)
                + self._sources(cc_where, cc_source_keys, sources),
                data_version=version,
                **fields,
            )
        except (TypeError, ValueError) as exc:
            raise self.fail(where, str(exc)) from exc

    def _fields(self, where: str, table: Mapping[str, Any], spec: Mapping[str, type]) -> dict[str, Any]:
        missing = sorted(set(spec) - set(table))
        if missing:
            raise self.fail(where, f"missing {', '.join(f'`{k}`' for k in missing)}")
        unknown = sorted(set(table) - set(spec))
        if unknown:
            raise self.fail(where, f"unknown {', '.join(f'`{k}`' for k in unknown)}")
        return {key: self._typed(f"{where}.{key}", table[key], kind) for key, kind in spec.items()}

    def _typed(self, where: str, value: object, kind: type) -> Any:
        if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, kind) and not isinstance(value, bool):
            return value
        raise self.fail(where, f"expected {kind.__name__}, got {value!r}")

    def _tensor_tflops(
        self, where: str, table: Mapping[str, Any], features: frozenset[Feature]
    ) -> dict[str, float]:
        expected = TENSOR_DTYPES | ({"fp8"} if Feature.FP8 in features else set())
        if set(table) != expected:
            raise self.fail(
                f"{where}.tensor_tflops", f"lists {sorted(table)}, the architecture has {sorted(expected)}"
            )
        return {k: self._typed(f"{where}.tensor_tflops.{k}", v, float) for k, v in table.items()}

    def _sources(self, where: str, keys: object, sources: Mapping[str, str]) -> tuple[str, ...]:
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
            raise self.fail(where, "`sources` must be a non-empty list of keys of [sources]")
        unknown = [k for k in keys if k not in sources]
        if unknown:
            raise self.fail(where, f"unknown source keys {unknown}")
        return tuple(sources[k] for k in keys)

    def _ceilings(self, where: str, tables: object) -> tuple[Ceiling, ...]:
        if not isinstance(tables, list):
            raise self.fail(where, "`measured` must be an array of tables")
        out: list[Ceiling] = []
        for i, raw in enumerate(tables):
            at = f"{where}.measured[{i}]"
            table = self._table(at, raw)
            if set(table) != set(CEILING_FIELDS):
                raise self.fail(at, f"needs exactly the keys {list(CEILING_FIELDS)}")
            date = table["date"]
            if isinstance(date, datetime.date):
                date = date.isoformat()
            try:
                datetime.date.fromisoformat(self._typed(f"{at}.date", date, str))
            except ValueError:
                raise self.fail(at, f"`date` is not an ISO date: {date!r}") from None
            out.append(
                Ceiling(
                    metric=self._typed(f"{at}.metric", table["metric"], str),
                    value=self._typed(f"{at}.value", table["value"], float),
                    unit=self._typed(f"{at}.unit", table["unit"], str),
                    date=date,
                    how=self._typed(f"{at}.how", table["how"], str),
                )
            )
        metrics = [c.metric for c in out]
        if len(set(metrics)) != len(metrics):
            raise self.fail(where, f"a metric is measured twice: {metrics}")
        return tuple(out)


# ---------------------------------------------------------------------------------------------------
# The hook
# ---------------------------------------------------------------------------------------------------


@hookimpl
def cake_register_targets(register: Callable[[Target], None]) -> None:
    """Register every target in the bundled data file."""
    for target in load_targets():
        register(target)


@hookimpl
def cake_register_features(register: Callable[[TargetFeature], None]) -> None:
    """Declare every feature an NVIDIA architecture string may offer."""
    for feature in FEATURES:
        register(feature)
