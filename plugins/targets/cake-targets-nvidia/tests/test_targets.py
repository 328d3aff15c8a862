"""cake-targets-nvidia through real entry-point discovery: ids, fields, feature sets, data versions, CLI.

These tests need the distribution installed (``pip install -e plugins/targets/cake-targets-nvidia``):
they load plugins the way ``cake`` does, through the ``cake`` entry-point group.
"""

from __future__ import annotations

import importlib.resources
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import attrs
import pytest
from cake_core import cli, plugins
from cake_core.errors import CakeInternalError
from cake_core.target import Feature, Target

import cake_targets_nvidia as nv

DISTRIBUTION = "cake-targets-nvidia"
ENTRY_POINT = "nvidia-targets"

# id -> (product, NVRTC architecture, compute capability, architecture)
EXPECTED = {
    "a100": ("NVIDIA A100 SXM4 80GB", "sm_80", (8, 0), "ampere"),
    "a10": ("NVIDIA A10", "sm_86", (8, 6), "ampere"),
    "l40s": ("NVIDIA L40S", "sm_89", (8, 9), "ada"),
    "h100": ("NVIDIA H100 SXM5 80GB", "sm_90a", (9, 0), "hopper"),
    "h200": ("NVIDIA H200 SXM 141GB", "sm_90a", (9, 0), "hopper"),
    "b200": ("NVIDIA B200 (HGX B200, 180GB)", "sm_100a", (10, 0), "blackwell"),
}

# The feature rule, written out once more by hand so that a change to FEATURES_BY_ARCH is deliberate.
AMPERE = {"cp.async", "ldmatrix", "mma.sync"}
HOPPER_COMMON = AMPERE | {"fp8", "stmatrix", "tma", "mbarrier.tx", "clusters"}
EXPECTED_FEATURES = {
    "sm_80": AMPERE,
    "sm_86": AMPERE,
    "sm_89": AMPERE | {"fp8"},
    "sm_90": HOPPER_COMMON,
    "sm_90a": HOPPER_COMMON | {"wgmma", "setmaxnreg"},
    "sm_100a": HOPPER_COMMON | {"setmaxnreg", "tcgen05", "tmem"},
}

# Architecture facts used only to cross-check the datasheet figures (vendor whitepapers):
# FP32 lanes per SM, and dense bf16 tensor-core FLOP per clock per SM.
FP32_LANES_PER_SM = {(8, 0): 64, (8, 6): 128, (8, 9): 128, (9, 0): 128, (10, 0): 128}
BF16_FLOP_PER_CLOCK_PER_SM = {(8, 0): 2048, (8, 6): 1024, (8, 9): 1024, (9, 0): 4096, (10, 0): 8192}


def _bundled_toml() -> dict:
    text = importlib.resources.files("cake_targets_nvidia").joinpath("targets.toml").read_text("utf-8")
    return tomllib.loads(text)


@pytest.fixture(scope="module")
def registry() -> plugins.Registry:
    return plugins.load()


@pytest.fixture(scope="module")
def targets(registry: plugins.Registry) -> dict[str, Target]:
    return {name: registry.get("targets", name) for name in EXPECTED}


@pytest.fixture(autouse=True)
def _fresh_process_registry(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(plugins.ALLOW_ENV, raising=False)
    plugins.reset()
    yield
    plugins.reset()


# ---------------------------------------------------------------------------------------------------
# Discovery
# ---------------------------------------------------------------------------------------------------


def test_every_id_is_registered_through_the_entry_point(registry: plugins.Registry) -> None:
    assert set(EXPECTED) <= set(registry.names("targets"))
    for name in EXPECTED:
        info = registry.registration("targets", name).plugin
        assert (info.name, info.distribution, info.module) == (
            ENTRY_POINT,
            DISTRIBUTION,
            "cake_targets_nvidia",
        )
        assert not info.builtin
        assert info.version == "0.1.0"


def test_plugin_lists_exactly_the_six_targets_and_its_features(registry: plugins.Registry) -> None:
    assert registry.registered_by(ENTRY_POINT) == {
        "targets": sorted(EXPECTED), "features": sorted(f.name for f in nv.FEATURES)
    }


def test_it_declares_every_feature_an_architecture_offers() -> None:
    declared = {f.name for f in nv.FEATURES}
    assert set().union(*nv.FEATURES_BY_ARCH.values()) == declared
    assert all(f.doc for f in nv.FEATURES)


def test_allow_list_selects_the_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(plugins.ALLOW_ENV, DISTRIBUTION)
    assert set(EXPECTED) <= set(plugins.load().names("targets"))
    monkeypatch.setenv(plugins.ALLOW_ENV, "cake-rules-core")  # another installed plugin only
    assert not set(EXPECTED) & set(plugins.load().names("targets"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_identity(targets: dict[str, Target], name: str) -> None:
    product, arch, cc, architecture = EXPECTED[name]
    t = targets[name]
    assert (t.name, t.product, t.nvrtc_arch, t.compute_capability, t.architecture, t.vendor) == (
        name, product, arch, cc, architecture, "nvidia",
    )  # fmt: skip
    assert t.sm == cc[0] * 10 + cc[1]


# ---------------------------------------------------------------------------------------------------
# Fields
# ---------------------------------------------------------------------------------------------------


def test_every_target_field_comes_from_the_data_or_is_derived() -> None:
    """No Target field silently keeps its default: a new field in cake-core fails here until handled."""
    fields = set(attrs.fields_dict(Target))
    supplied = set(nv.TARGET_FIELDS) | set(nv.CAPABILITY_FIELDS) | nv.DERIVED_FIELDS
    assert fields == supplied
    assert not set(nv.TARGET_FIELDS) & set(nv.CAPABILITY_FIELDS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_numbers_are_positive(targets: dict[str, Target], name: str) -> None:
    t = targets[name]
    numeric = [f.name for f in attrs.fields(Target) if isinstance(getattr(t, f.name), (int, float))]
    declared = {**nv.TARGET_FIELDS, **nv.CAPABILITY_FIELDS}
    assert set(numeric) == {k for k, kind in declared.items() if kind in (int, float)}
    for field in numeric:
        value = getattr(t, field)
        assert not isinstance(value, bool) and value > 0, field
    assert t.tensor_tflops and all(v > 0 for v in t.tensor_tflops.values())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_limits_are_consistent(targets: dict[str, Target], name: str) -> None:
    t = targets[name]
    assert t.warp_size == 32
    assert t.max_threads_per_block <= t.max_threads_per_sm
    assert t.max_threads_per_sm % t.warp_size == 0
    assert t.max_threads_per_block % t.warp_size == 0
    assert t.regs_per_block <= t.regs_per_sm
    assert t.regs_per_thread <= 255
    assert t.smem_per_block_default <= t.smem_per_block_optin <= t.smem_per_sm
    assert t.smem_per_block_optin + t.smem_reserved_per_block <= t.smem_per_sm
    assert t.l2_bytes < t.dram_bytes
    assert t.dram_bytes % 2**20 == 0  # driver totals are whole MiB


def test_shared_memory_opt_in_maxima() -> None:
    expected = {"sm_80": 166912, "sm_86": 101376, "sm_89": 101376, "sm_90a": 232448, "sm_100a": 232448}
    for t in nv.load_targets():
        assert t.smem_per_block_optin == expected[t.nvrtc_arch], t.name


def test_hopper_caches(targets: dict[str, Target]) -> None:
    assert targets["h100"].l2_bytes == 50 * 2**20
    assert targets["h200"].l2_bytes == 60 * 2**20


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fp32_peak_matches_sm_count_and_clock(targets: dict[str, Target], name: str) -> None:
    t = targets[name]
    computed = t.sm_count * FP32_LANES_PER_SM[t.compute_capability] * 2 * t.boost_clock_mhz * 1e6 / 1e12
    assert t.fp32_tflops == pytest.approx(computed, rel=0.02)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_tensor_peaks_are_dense(targets: dict[str, Target], name: str) -> None:
    """A sparse (2:4) figure would exceed what the SMs can issue at the boost clock."""
    t = targets[name]
    rate = BF16_FLOP_PER_CLOCK_PER_SM[t.compute_capability]
    ceiling = t.sm_count * rate * t.boost_clock_mhz * 1e6 / 1e12
    assert t.tensor_tflops["bf16"] <= ceiling * 1.01
    assert t.tensor_tflops["bf16"] >= ceiling * 0.85
    assert t.tensor_tflops["fp16"] == t.tensor_tflops["bf16"]
    assert t.tensor_tflops["tf32"] < t.tensor_tflops["bf16"]
    if "fp8" in t.tensor_tflops:
        assert t.tensor_tflops["fp8"] == pytest.approx(2 * t.tensor_tflops["bf16"], rel=0.02)
    assert t.fp32_tflops < t.tensor_tflops["tf32"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_tensor_dtypes_follow_fp8_support(targets: dict[str, Target], name: str) -> None:
    t = targets[name]
    expected = {"fp16", "bf16", "tf32"} | ({"fp8"} if t.has(Feature.FP8) else set())
    assert set(t.tensor_tflops) == expected
    assert ("fp8" in t.tensor_tflops) == (t.nvrtc_arch in {"sm_89", "sm_90a", "sm_100a"})


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sources_are_named(targets: dict[str, Target], name: str) -> None:
    t = targets[name]
    assert len(t.sources) >= 3
    assert len(set(t.sources)) == len(t.sources)
    assert any("Technical Specifications per Compute Capability" in s for s in t.sources)
    assert sum("https://" in s for s in t.sources) >= 3


# ---------------------------------------------------------------------------------------------------
# Measured ceilings
# ---------------------------------------------------------------------------------------------------


def test_h200_measured_ceilings(targets: dict[str, Target]) -> None:
    h200 = targets["h200"]
    assert {c.metric: (c.value, c.unit, c.date) for c in h200.measured} == {
        "bf16_tflops": (761.0, "TFLOP/s", "2026-11-29"),
        "fp16_tflops": (675.0, "TFLOP/s", "2026-11-29"),
        "copy_gbs": (4270.0, "GB/s", "2026-11-29"),
    }
    for c in h200.measured:
        assert "do_bench" in c.how and len(c.how) > 40
    assert h200.ceiling("bf16_tflops") == 761.0
    assert h200.ceiling("bf16_tflops") < h200.tensor_tflops["bf16"]
    assert h200.ceiling("fp16_tflops") < h200.tensor_tflops["fp16"]
    assert h200.ceiling("copy_gbs") < h200.dram_bandwidth_gbs
    assert h200.ceiling("no_such_metric") is None


def test_only_h200_carries_measurements(targets: dict[str, Target]) -> None:
    assert [n for n, t in targets.items() if t.measured] == ["h200"]


# ---------------------------------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------------------------------


def test_feature_table_is_exactly_the_rule() -> None:
    assert {arch: {f.value for f in fs} for arch, fs in nv.FEATURES_BY_ARCH.items()} == EXPECTED_FEATURES


def test_wgmma_only_on_sm_90a() -> None:
    assert [arch for arch, fs in nv.FEATURES_BY_ARCH.items() if Feature.WGMMA in fs] == ["sm_90a"]
    assert Feature.WGMMA not in nv.features_for("sm_90")
    assert Feature.SETMAXNREG not in nv.features_for("sm_90")
    assert Feature.WGMMA not in nv.features_for("sm_100a")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_target_features_follow_the_architecture_string(targets: dict[str, Target], name: str) -> None:
    t = targets[name]
    assert t.features == nv.FEATURES_BY_ARCH[t.nvrtc_arch]
    assert {f.value for f in t.features} == EXPECTED_FEATURES[t.nvrtc_arch]
    assert t.has("wgmma") == (t.nvrtc_arch == "sm_90a")


def test_wgmma_targets(targets: dict[str, Target]) -> None:
    assert sorted(n for n, t in targets.items() if t.has(Feature.WGMMA)) == ["h100", "h200"]
    assert sorted(n for n, t in targets.items() if t.has(Feature("tcgen05"))) == ["b200"]
    assert sorted(n for n, t in targets.items() if t.has(Feature.TMA)) == ["b200", "h100", "h200"]


@pytest.mark.parametrize(
    ("arch", "cc"), [("sm_80", (8, 0)), ("sm_86", (8, 6)), ("sm_89", (8, 9)), ("sm_90", (9, 0)),
                     ("sm_90a", (9, 0)), ("sm_100a", (10, 0)), ("sm_120", (12, 0))],
)  # fmt: skip
def test_compute_capability_of(arch: str, cc: tuple[int, int]) -> None:
    assert nv.compute_capability_of(arch) == cc


@pytest.mark.parametrize("bad", ["sm90", "compute_90a", "sm_9", "sm_90b", ""])
def test_compute_capability_of_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        nv.compute_capability_of(bad)


def test_features_for_unknown_architecture() -> None:
    with pytest.raises(ValueError, match="unknown NVRTC architecture `sm_87`"):
        nv.features_for("sm_87")


# ---------------------------------------------------------------------------------------------------
# Data versions
# ---------------------------------------------------------------------------------------------------


def test_data_version_is_stamped_on_every_target(targets: dict[str, Target]) -> None:
    version = _bundled_toml()["data_version"]
    assert re.fullmatch(r"\d{4}\.\d{1,2}\.\d+", version)
    assert {t.data_version for t in targets.values()} == {version}


def test_data_version_follows_the_file(tmp_path: Path) -> None:
    text = importlib.resources.files("cake_targets_nvidia").joinpath("targets.toml").read_text("utf-8")
    path = tmp_path / "targets.toml"
    path.write_text(re.sub(r'(?m)^data_version = ".*"$', 'data_version = "2099.1.7"', text), "utf-8")
    assert {t.data_version for t in nv.load_targets(path)} == {"2099.1.7"}


# ---------------------------------------------------------------------------------------------------
# A broken data file is this package's bug, reported with the table it is in
# ---------------------------------------------------------------------------------------------------


def _load_edited(tmp_path: Path, old: str, new: str) -> tuple[Target, ...]:
    text = importlib.resources.files("cake_targets_nvidia").joinpath("targets.toml").read_text("utf-8")
    assert text.count(old) == 1, old
    path = tmp_path / "targets.toml"
    path.write_text(text.replace(old, new), "utf-8")
    return nv.load_targets(path)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('nvrtc_arch = "sm_86"', 'nvrtc_arch = "sm_87"', r"targets\.a10: unknown NVRTC architecture `sm_87`"),
        (
            "sm_count = 108\n",
            "sm_count = 108\nmax_ctas_per_sm = 8\n",
            r"targets\.a100: unknown `max_ctas_per_sm`",
        ),
        ("fp32_tflops = 19.5\n", "", r"targets\.a100: missing `fp32_tflops`"),
        ("sm_count = 72\n", 'sm_count = "72"\n', r"targets\.a10\.sm_count: expected int"),
        ("tf32 = 156.0 }", "tf32 = 156.0, fp8 = 624.0 }", r"targets\.a100\.tensor_tflops: lists"),
        (
            'sources = ["a10-datasheet"',
            'sources = ["a10-datashet"',
            r"unknown source keys \['a10-datashet'\]",
        ),
        (
            'architecture = "ada"',
            'architecture = "ada"\nspare = 1',
            r'compute_capabilities\."8\.9": unknown `spare`',
        ),
        ('date = "2026-11-29"\nhow = "device', 'date = "29.11.2026"\nhow = "device', r"not an ISO date"),
        ("sm_count = 148", "sm_count = 0", r"targets\.b200: sm_count must be positive"),
        ('data_version = "2026.11.0"', "data_version = 2026", r"`data_version` must be a non-empty string"),
    ],
)
def test_malformed_data_is_reported(tmp_path: Path, old: str, new: str, message: str) -> None:
    with pytest.raises(nv.TargetDataError, match=message) as info:
        _load_edited(tmp_path, old, new)
    assert isinstance(info.value, CakeInternalError)
    assert str(tmp_path / "targets.toml") in str(info.value)


def test_unquoted_toml_date_is_accepted(tmp_path: Path) -> None:
    (h200,) = [
        t
        for t in _load_edited(
            tmp_path, 'date = "2026-11-29"\nhow = "device', 'date = 2026-11-29\nhow = "device'
        )
        if t.name == "h200"
    ]
    assert h200.measured[-1].date == "2026-11-29"


# ---------------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------------


def _check_cli_records(records: list[dict]) -> None:
    by_name = {r["name"]: r for r in records}
    assert set(EXPECTED) <= set(by_name)
    fields = set(attrs.fields_dict(Target))
    for name in EXPECTED:
        record = by_name[name]
        assert fields <= set(record), sorted(fields - set(record))
        assert record["plugin"] == {"distribution": DISTRIBUTION, "version": "0.1.0"}
        assert record["features"] == sorted(EXPECTED_FEATURES[record["nvrtc_arch"]])
        assert record["compute_capability"] == list(EXPECTED[name][2])
        assert record["data_version"] == _bundled_toml()["data_version"]
    assert [c["metric"] for c in by_name["h200"]["measured"]] == ["bf16_tflops", "fp16_tflops", "copy_gbs"]


def test_cli_targets_json_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["targets", "--json"]) == 0
    _check_cli_records(json.loads(capsys.readouterr().out))


def _cake_command() -> list[str]:
    script = shutil.which("cake", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "cake_core.cli"]


def test_cli_console_script_lists_all_targets() -> None:
    done = subprocess.run(
        [*_cake_command(), "targets", "--json"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    _check_cli_records(json.loads(done.stdout))


def test_cli_plugins_json_names_the_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plugins", "--json"]) == 0
    (record,) = [r for r in json.loads(capsys.readouterr().out) if r["name"] == ENTRY_POINT]
    assert record["distribution"] == DISTRIBUTION
    assert record["registered"] == {"targets": sorted(EXPECTED), "features": sorted(f.name for f in nv.FEATURES)}


def test_cli_targets_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["targets"]) == 0
    out = capsys.readouterr().out
    for name in EXPECTED:
        assert re.search(rf"\b{name}\b", out), name
