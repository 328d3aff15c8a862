"""What the host refuses, with one line naming the plugin and its distribution: the same name twice,
hooks Cake does not define, objects of the wrong interface, plugins that break while loading.

Conflicts and broken plugins are installed as real (fake) distributions, so they go through the same
entry-point discovery as the example plugin; the command's exit status and stderr are checked on the
real console script."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest
from cake_core import cli, plugins
from cake_core.errors import CakeUserError, PluginConflictError
from cake_core.hookspecs import hookimpl
from cake_core.verify.rule import Rule

from .conftest import FakeDistribution, InstallFake

EXAMPLE = "cake-example-plugin 0.3.1 (plugin `example`)"

TARGET_CLASH = """
    import attrs
    from cake_core.hookspecs import hookimpl
    from cake_example_plugin.target import load_target

    @hookimpl
    def cake_register_targets(register):
        register(attrs.evolve(load_target(), product="Another part under the same id"))
"""

PRIMITIVE_CLASH = """
    from cake_core.hookspecs import hookimpl
    from cake_example_plugin.primitive import ScaleRows

    class MyScaleRows(ScaleRows):
        summary = "another `scale.rows`"

    @hookimpl
    def cake_register_primitives(register):
        register(MyScaleRows())
"""

MISSPELLED_HOOK = """
    from cake_core.hookspecs import hookimpl

    @hookimpl
    def cake_register_target(register):
        pass
"""


def _cake(dist: FakeDistribution, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cake_core.cli", *args],
        capture_output=True, text=True, timeout=120, env=dist.env(), check=False,
    )  # fmt: skip


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


# ---------------------------------------------------------------------------------------------------
# The same name twice
# ---------------------------------------------------------------------------------------------------


def test_two_distributions_registering_one_target(install_fake: InstallFake) -> None:
    install_fake("cake-clash", "9.9.0", "clash", "cake_clash_target", TARGET_CLASH)
    with pytest.raises(PluginConflictError) as info:
        plugins.load()
    message = str(info.value)
    assert message.startswith("target `example-gpu` is registered twice: ")
    assert "cake-clash 9.9.0 (plugin `clash`)" in message and EXAMPLE in message
    assert "\n" not in message


def test_two_distributions_registering_one_primitive(install_fake: InstallFake) -> None:
    install_fake("cake-clash", "9.9.0", "clash", "cake_clash_primitive", PRIMITIVE_CLASH)
    with pytest.raises(PluginConflictError) as info:
        plugins.load()
    message = str(info.value)
    assert message.startswith("primitive `scale.rows` is registered twice: ")
    assert "cake-clash 9.9.0 (plugin `clash`)" in message and EXAMPLE in message


def test_a_plugin_cannot_take_a_core_primitive_name() -> None:
    class Plugin:
        __name__ = "shadow"

        @hookimpl
        def cake_register_primitives(self, register: Callable) -> None:
            from cake_example_plugin.primitive import ScaleRows

            class Shadow(ScaleRows):
                name = "store"

            register(Shadow())

    with pytest.raises(PluginConflictError, match=r"primitive `store` is registered twice: by cake-core "):
        plugins.load(extra=[Plugin()])


def test_cake_plugins_exits_2_with_one_line_on_a_conflict(install_fake: InstallFake) -> None:
    dist = install_fake("cake-clash", "9.9.0", "clash", "cake_clash_target", TARGET_CLASH)
    line = _one_line(_cake(dist, "plugins"))
    assert "target `example-gpu` is registered twice" in line
    assert "cake-clash 9.9.0" in line and "cake-example-plugin 0.3.1" in line


def test_cake_plugins_in_process_on_a_conflict(install_fake: InstallFake, capsys: pytest.CaptureFixture) -> None:
    install_fake("cake-clash", "9.9.0", "clash", "cake_clash_primitive", PRIMITIVE_CLASH)
    assert cli.main(["plugins", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert "primitive `scale.rows` is registered twice" in line


def test_the_allow_list_resolves_a_conflict(install_fake: InstallFake, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake("cake-clash", "9.9.0", "clash", "cake_clash_target", TARGET_CLASH)
    monkeypatch.setenv(plugins.ALLOW_ENV, "cake-clash,cake-targets-nvidia")
    reg = plugins.load()
    assert reg.get("targets", "example-gpu").product == "Another part under the same id"
    assert reg.registration("targets", "example-gpu").plugin.distribution == "cake-clash"


def test_two_plugins_with_one_entry_point_name(install_fake: InstallFake) -> None:
    install_fake("cake-other-example", "1.0.0", "example", "cake_other_example", "")
    with pytest.raises(PluginConflictError, match=r"two plugins are named `example`"):
        plugins.load()


# ---------------------------------------------------------------------------------------------------
# Hooks Cake does not define, or would never call
# ---------------------------------------------------------------------------------------------------


def test_an_unknown_hook_is_rejected_in_one_line(install_fake: InstallFake) -> None:
    install_fake("cake-typo", "0.1.0", "typo", "cake_typo", MISSPELLED_HOOK)
    with pytest.raises(CakeUserError) as info:
        plugins.load()
    assert str(info.value) == (
        "plugin `typo` (cake-typo 0.1.0) implements `cake_register_target`, a hook Cake does not define "
        "(did you mean `cake_register_targets`?)"
    )


def test_cake_plugins_exits_2_on_an_unknown_hook(install_fake: InstallFake) -> None:
    dist = install_fake("cake-typo", "0.1.0", "typo", "cake_typo", MISSPELLED_HOOK)
    line = _one_line(_cake(dist, "plugins"))
    assert "`cake_register_target`, a hook Cake does not define" in line


def test_an_unrelated_unknown_hook_lists_the_hooks() -> None:
    class Plugin:
        __name__ = "odd"

        @hookimpl
        def cake_xyzzy_plugh(self) -> None:
            pass

    with pytest.raises(CakeUserError, match=r"`cake_xyzzy_plugh`, a hook Cake does not define \(hooks: ") as caught:
        plugins.load(extra=[Plugin()])
    listed = str(caught.value).split("(hooks: ")[1].rstrip(")").split(", ")
    assert "cake_register_targets" in listed and "cake_run_started" in listed and listed == sorted(listed)


def test_a_hook_without_hookimpl_is_rejected() -> None:
    class Plugin:
        __name__ = "unmarked"

        def cake_register_targets(self, register: Callable) -> None:
            pass

    with pytest.raises(CakeUserError, match=r"defines `cake_register_targets` without `@hookimpl`"):
        plugins.load(extra=[Plugin()])


def test_an_argument_the_spec_does_not_have_is_rejected_in_one_line() -> None:
    class Plugin:
        __name__ = "greedy"

        @hookimpl
        def cake_register_targets(self, register: Callable, target: str) -> None:
            pass

    with pytest.raises(CakeUserError) as info:
        plugins.load(extra=[Plugin()])
    message = str(info.value)
    assert message.startswith("plugin `greedy` ((in-process) 0) is not a valid Cake plugin: ")
    assert "'target'" in message and "\n" not in message


def test_an_implementation_may_take_fewer_arguments() -> None:
    calls: list[str] = []

    class Plugin:
        __name__ = "quiet"

        @hookimpl
        def cake_register_tactics(self) -> None:
            calls.append("called")

    plugins.load(extra=[Plugin()])
    assert calls == ["called"]


# ---------------------------------------------------------------------------------------------------
# Objects of the wrong interface
# ---------------------------------------------------------------------------------------------------


class _NotAnything:
    name = "impostor"


@pytest.mark.parametrize("hook", sorted(plugins.BY_HOOK))
def test_an_object_of_the_wrong_interface_is_rejected(hook: str) -> None:
    iface = plugins.BY_HOOK[hook].interface.replace(":", ".")

    def impl(register: Callable) -> None:
        register(_NotAnything())

    plugin = type("Plugin", (), {"__name__": "impostor-plugin", hook: staticmethod(hookimpl(impl))})()
    with pytest.raises(CakeUserError) as info:
        plugins.load(extra=[plugin])
    message = str(info.value)
    assert message.startswith("plugin `impostor-plugin` ((in-process) 0) registered a ")
    assert f"that is not a {iface}: " in message
    assert "_NotAnything" in message


def test_an_object_without_a_name_is_rejected() -> None:
    class Nameless(Rule):
        slug = "nameless"

    class Plugin:
        __name__ = "nameless-plugin"

        @hookimpl
        def cake_register_rules(self, register: Callable) -> None:
            register(Nameless())

    with pytest.raises(CakeUserError, match=r"registered a rule without a name$"):
        plugins.load(extra=[Plugin()])


# ---------------------------------------------------------------------------------------------------
# Plugins that break
# ---------------------------------------------------------------------------------------------------


def test_a_hook_that_raises_is_the_plugin_s_fault(install_fake: InstallFake) -> None:
    dist = install_fake(
        "cake-broken", "0.2.0", "broken", "cake_broken",
        """
        from cake_core.hookspecs import hookimpl

        @hookimpl
        def cake_register_problems(register):
            raise RuntimeError("data file missing")
        """,
    )  # fmt: skip
    with pytest.raises(CakeUserError) as info:
        plugins.load()
    assert str(info.value) == (
        "plugin `broken` (cake-broken 0.2.0) failed in `cake_register_problems`: RuntimeError: data file missing"
    )
    line = _one_line(_cake(dist, "problems"))
    assert "failed in `cake_register_problems`" in line


def test_an_entry_point_that_fails_to_import(install_fake: InstallFake) -> None:
    install_fake("cake-missing", "0.1.0", "missing", "cake_missing", "import cake_no_such_module\n")
    with pytest.raises(CakeUserError) as info:
        plugins.load()
    assert str(info.value) == (
        "plugin `missing` (cake-missing 0.1.0) failed to load: "
        "ModuleNotFoundError: No module named 'cake_no_such_module'"
    )
