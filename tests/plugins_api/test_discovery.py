"""Discovery through the entry-point group ``cake``: the installed third-party package
``cake-example-plugin``, what ``cake plugins`` says about it, the ``CAKE_PLUGINS`` allow-list and
``CAKE_TRACE_HOOKS``."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys

import cake_example_plugin
import pytest
from cake_core import cli, plugins
from cake_core.errors import CakeUserError
from cake_core.ir.primitive import Primitive
from cake_core.target import Target

DISTRIBUTION = "cake-example-plugin"
VERSION = "0.3.1"
ENTRY_POINT = "example"
REGISTERED = {"targets": ["example-gpu"], "primitives": ["scale.rows"], "problems": ["scale-rows"]}


def test_the_example_plugin_is_installed_with_one_entry_point() -> None:
    dist = importlib.metadata.distribution(DISTRIBUTION)
    assert dist.version == VERSION == cake_example_plugin.__version__
    (ep,) = [ep for ep in dist.entry_points if ep.group == plugins.ENTRY_POINT_GROUP]
    assert (ep.name, ep.value) == (ENTRY_POINT, "cake_example_plugin")
    assert any(r.startswith("cake-core") for r in dist.requires or [])


def test_load_discovers_it_with_distribution_and_version() -> None:
    reg = plugins.load()
    info = reg.plugins[ENTRY_POINT]
    assert (info.distribution, info.version, info.module, info.builtin) == (
        DISTRIBUTION, VERSION, "cake_example_plugin", False,
    )  # fmt: skip
    assert reg.registered_by(ENTRY_POINT) == REGISTERED
    target = reg.registration("targets", "example-gpu")
    assert isinstance(target.obj, Target) and target.plugin is info
    prim = reg.registration("primitives", "scale.rows")
    assert isinstance(prim.obj, Primitive) and prim.plugin is info


def test_builtins_load_first_then_entry_points_by_name() -> None:
    names = list(plugins.load().plugins)
    assert names[: len(plugins.BUILTIN_PLUGINS)] == list(plugins.BUILTIN_PLUGINS)
    external = names[len(plugins.BUILTIN_PLUGINS) :]
    assert ENTRY_POINT in external and external == sorted(external)


def test_cake_plugins_json_lists_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plugins", "--json"]) == 0
    records = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    record = records[ENTRY_POINT]
    assert record == {
        "name": ENTRY_POINT,
        "distribution": DISTRIBUTION,
        "version": VERSION,
        "builtin": False,
        "module": "cake_example_plugin",
        "categories": sorted(REGISTERED),
        "registered": REGISTERED,
    }
    assert records["cake_core.primitives"]["distribution"] == "cake-core"
    assert "scale.rows" not in records["cake_core.primitives"]["registered"]["primitives"]


def test_cake_plugins_table_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plugins"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if re.search(rf"\b{ENTRY_POINT}\b", line))
    assert DISTRIBUTION in row and VERSION in row


# ---------------------------------------------------------------------------------------------------
# The allow-list
# ---------------------------------------------------------------------------------------------------


def test_allow_list_by_distribution_leaves_the_example_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(plugins.ALLOW_ENV, "cake-targets-nvidia")
    reg = plugins.load()
    assert ENTRY_POINT not in reg.plugins
    assert "example-gpu" not in reg.names("targets") and "h200" in reg.names("targets")
    assert "scale.rows" not in reg.names("primitives")
    # the built-in plugins always load
    assert "store" in reg.names("primitives") and "kmeans-assign" in reg.names("problems")


def test_allow_list_by_entry_point_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(plugins.ALLOW_ENV, f" {ENTRY_POINT} , nvidia-targets")
    reg = plugins.load()
    assert [n for n, i in reg.plugins.items() if not i.builtin] == [ENTRY_POINT, "nvidia-targets"]
    assert reg.registration("targets", "example-gpu").plugin.name == ENTRY_POINT


def test_a_target_whose_features_no_loaded_plugin_declares_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example target lists NVIDIA features: without cake-targets-nvidia, nothing declares them."""
    monkeypatch.setenv(plugins.ALLOW_ENV, ENTRY_POINT)
    with pytest.raises(CakeUserError) as info:
        plugins.load()
    assert str(info.value) == (
        f"plugin `{ENTRY_POINT}` ({DISTRIBUTION} {VERSION}) registered target `example-gpu`, which uses the "
        "feature `cp.async` that no loaded plugin declares (through `cake_register_features`)"
    )


def test_allow_list_of_several(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(plugins.ALLOW_ENV, f"cake-targets-nvidia,{DISTRIBUTION}")
    reg = plugins.load()
    assert {"example-gpu", "h200"} <= set(reg.names("targets"))


def test_allow_list_naming_nothing_installed_is_an_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A name no installed plugin has is a typo: one line naming it and what is installed, exit 2."""
    monkeypatch.setenv(plugins.ALLOW_ENV, "cake-targets-nvidia,no-such-plugin")
    with pytest.raises(CakeUserError, match=r"names `no-such-plugin`, which no installed plugin is called"):
        plugins.load()
    assert cli.main(["targets"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "cake-targets-nvidia" in line  # what is installed


def test_allow_list_of_one_data_free_plugin_leaves_no_hardware(monkeypatch: pytest.MonkeyPatch) -> None:
    """Targets come only from plugins: with only a rule pack, the core knows no hardware."""
    monkeypatch.setenv(plugins.ALLOW_ENV, "cake-rules-advisory")
    reg = plugins.load()
    assert reg.names("targets") == []


def test_allow_list_applies_to_the_command(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv(plugins.ALLOW_ENV, "cake-targets-nvidia")
    assert cli.main(["targets", "--json"]) == 0
    names = [t["name"] for t in json.loads(capsys.readouterr().out)]
    assert "example-gpu" not in names and "a100" in names


# ---------------------------------------------------------------------------------------------------
# Tracing
# ---------------------------------------------------------------------------------------------------


def test_trace_hooks_writes_every_call_to_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(plugins.TRACE_ENV, "1")
    plugins.load()
    captured = capsys.readouterr()
    assert captured.out == ""
    for hook in ("cake_register_targets", "cake_register_primitives", "cake_register_problems"):
        assert f"{hook} [hook]" in captured.err and f"finish {hook} -->" in captured.err
    # the trace names the plugin whose hook runs
    assert f"<register targets of plugin `{ENTRY_POINT}` ({DISTRIBUTION} {VERSION})>" in captured.err
    assert "<register primitives of plugin `cake_core.primitives` (cake-core " in captured.err


def test_no_trace_without_the_variable(capsys: pytest.CaptureFixture[str]) -> None:
    plugins.load()
    assert capsys.readouterr().err == ""


def test_trace_from_the_console_script() -> None:
    env = {**_env(), plugins.TRACE_ENV: "1"}
    done = subprocess.run(
        [sys.executable, "-m", "cake_core.cli", "plugins", "--json"],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "cake_register_targets [hook]" in done.stderr
    json.loads(done.stdout)  # the trace stays off stdout


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop(plugins.ALLOW_ENV, None)
    env.pop(plugins.TRACE_ENV, None)
    return env
