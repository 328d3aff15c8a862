"""``cake --version``, ``cake targets``, ``cake problems``: what the registry holds, as tables and JSON."""

from __future__ import annotations

import json
import re

import attrs
import pytest
from cake_core import __version__, cli
from cake_core.target import Target

from .conftest import Cake

NVIDIA = {
    # name: (nvrtc_arch, compute capability, architecture)
    "a10": ("sm_86", [8, 6], "ampere"),
    "a100": ("sm_80", [8, 0], "ampere"),
    "l40s": ("sm_89", [8, 9], "ada"),
    "h100": ("sm_90a", [9, 0], "hopper"),
    "h200": ("sm_90a", [9, 0], "hopper"),
    "b200": ("sm_100a", [10, 0], "blackwell"),
}
FIELDS = set(attrs.fields_dict(Target)) | {"plugin"}


def test_version_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"cake {__version__}\n"


def test_version_of_the_console_script(cake: Cake) -> None:
    done = cake("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"cake {__version__}\n", "")


def test_targets_json_has_every_field_of_every_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["targets", "--json"]) == 0
    records = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(NVIDIA) | {"example-gpu"} <= set(records)
    for name, (arch, cc, family) in NVIDIA.items():
        r = records[name]
        assert set(r) == FIELDS, name
        assert (r["nvrtc_arch"], r["compute_capability"], r["architecture"]) == (arch, cc, family)
        assert r["plugin"] == {"distribution": "cake-targets-nvidia", "version": "0.1.0"}
        assert r["features"] == sorted(r["features"]) and "cp.async" in r["features"]
        assert r["sm_count"] > 0 and r["smem_per_block_optin"] > 0 and r["sources"]
        assert {"bf16", "fp16", "tf32"} <= set(r["tensor_tflops"])
    example = records["example-gpu"]
    assert set(example) == FIELDS
    assert example["plugin"] == {"distribution": "cake-example-plugin", "version": "0.3.1"}
    assert (example["nvrtc_arch"], example["compute_capability"], example["vendor"]) == ("sm_89", [8, 9], "example")
    assert example["features"] == ["cp.async", "fp8", "ldmatrix", "mma.sync"]
    # sm_90a has wgmma, sm_100a does not (it has tcgen05): features follow the architecture string
    assert "wgmma" in records["h200"]["features"] and "wgmma" not in records["b200"]["features"]


def test_targets_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["targets"]) == 0
    out = capsys.readouterr().out
    for name in [*NVIDIA, "example-gpu"]:
        assert re.search(rf"(?m)^│ {re.escape(name)} ", out), name


def test_problems_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["problems", "--json"]) == 0
    records = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    kmeans = records["kmeans-assign"]
    assert set(kmeans) == {"name", "summary", "dtypes", "tensors", "default_cell", "cells", "plugin"}
    assert kmeans["plugin"] == "cake-core" and kmeans["dtypes"] == ["bf16", "f16"]
    assert kmeans["tensors"][-1] == "out: [B, N] in i32 (output)"
    assert kmeans["default_cell"] == {"shape": {"B": 32, "N": 65536, "K": 1024, "D": 128}, "dtype": "bf16"}
    assert kmeans["default_cell"] in kmeans["cells"]
    scale = records["scale-rows"]
    assert scale["plugin"] == "cake-example-plugin"
    assert scale["tensors"] == ["x: [N, D] in {f32, bf16, f16} (input)", "out: [N, D] in {f32, bf16, f16} (output)"]


def test_problems_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["problems"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"(?m)^kmeans-assign: nearest-centroid assignment", out)
    assert "  default cell: {'B': 32, 'N': 65536, 'K': 1024, 'D': 128} bf16" in out
    assert re.search(r"(?m)^scale-rows: out = 2 \* x", out)
