"""Fixtures of the cake-agent-search tests: small tactics of the tests' own (a ladder of compile-time constants, and
a move the verifier refuses), registries holding them and no other tactic, the committed kmeans-assign schedules
as parents, and the run information of the kmeans-assign reference cell."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import attrs
import pytest
from cake_core import pipeline, plugins
from cake_core.hookspecs import hookimpl
from cake_core.ir import nodes as n
from cake_core.ir.hashing import structural_hash
from cake_core.ir.transform import set_consts
from cake_core.loop.agent import Parent
from cake_core.loop.records import Budgets, RunInfo
from cake_core.loop.tactic import Application, Tactic

SCHEDULES = Path(pipeline.__file__).resolve().parent / "problems" / "kmeans_assign" / "schedules"
LADDER = (16, 32, 64, 128, 256)


class ConstLadder:
    """Moves a compile-time constant of a kernel one rung up or down ``LADDER``: the tests' stand-in for a
    tile-shape tactic (site ``KERNEL.CONST``, params ``value``)."""

    name = "test-ladder"
    precondition = "the kernel has the constant, written as a literal on the ladder"

    def __init__(self, consts: Sequence[str] = ("BM", "BN", "BK", "R")) -> None:
        self.consts = tuple(consts)

    def applications(self, module: n.Module, target: object) -> list[Application]:
        out = []
        for k in module.kernels:
            for c in k.consts:
                if c.name not in self.consts or not isinstance(c.value, n.Num) or c.value.value not in LADDER:
                    continue
                rung = LADDER.index(int(c.value.value))
                for r in (rung - 1, rung + 1):
                    if 0 <= r < len(LADDER):
                        out.append(Application(self.name, f"{k.name}.{c.name}", {"value": LADDER[r]}))
        return out

    def apply(self, module: n.Module, target: object, application: Application) -> n.Module:
        kernel, const = application.site.split(".")
        return set_consts(module, {const: int(application.params["value"])}, kernel=kernel)


class Unmask:
    """Drops the bounds mask of a kernel's top-level ``store``: a move the verifier refuses (CR108, the store runs
    past the tensor's end), for the tests of how refusals steer the agent (site ``KERNEL.ROLE.INDEX``)."""

    name = "test-unmask"
    precondition = "a role has a top-level store with a bounds mask"

    def applications(self, module: n.Module, target: object) -> list[Application]:
        return [Application(self.name, f"{k.name}.{r.name}.{i}")
                for k in module.kernels for r in k.roles for i, st in enumerate(r.body)
                if isinstance(st, n.Op) and st.name == "store" and st.attr("oob") is not None]  # fmt: skip

    def apply(self, module: n.Module, target: object, application: Application) -> n.Module:
        kernel, role, index = application.site.split(".")

        def unmasked(r: n.Role) -> n.Role:
            st = r.body[int(index)]
            body = list(r.body)
            body[int(index)] = attrs.evolve(st, attrs=tuple(a for a in st.attrs if a.key != "oob"))
            return attrs.evolve(r, body=tuple(body))

        kernels = [attrs.evolve(k, roles=tuple(unmasked(r) if r.name == role else r for r in k.roles))
                   if k.name == kernel else k for k in module.kernels]  # fmt: skip
        return attrs.evolve(module, kernels=tuple(kernels))


def tactics_plugin(*tactics: Tactic) -> object:
    class Plugin:
        @staticmethod
        @hookimpl
        def cake_register_tactics(register: Callable[[Tactic], None]) -> None:
            for t in tactics:
                register(t)

    return Plugin()


@pytest.fixture
def use_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., plugins.Registry]]:
    """Makes the process-wide registry from every installed plugin except those that register one of the
    categories ``without`` (tactics by default, so that a tactic package installed beside this one changes
    nothing here), plus the in-process plugins and the ``tactics`` given."""

    def make(*extra: object, tactics: Sequence[Tactic] = (), without: Sequence[str] = ("tactics",)) -> plugins.Registry:
        monkeypatch.delenv(plugins.ALLOW_ENV, raising=False)
        everything = plugins.load()
        keep = [name for name, info in everything.plugins.items()
                if not info.builtin and not set(without) & set(everything.registered_by(name))]  # fmt: skip
        monkeypatch.setenv(plugins.ALLOW_ENV, ",".join(keep))
        reg = plugins.load(extra=[*extra, tactics_plugin(*tactics)])
        monkeypatch.setattr(plugins, "_REGISTRY", reg)
        return reg

    yield make
    plugins.reset()


@pytest.fixture
def registry(use_plugins: Callable[..., plugins.Registry]) -> plugins.Registry:
    """Installed plugins, the test's ladder as the only tactic."""
    return use_plugins(tactics=[ConstLadder()])


@pytest.fixture
def unmask() -> type[Unmask]:
    return Unmask


@pytest.fixture
def schedules() -> Path:
    """The committed kmeans-assign schedules."""
    return SCHEDULES


@pytest.fixture
def const_ladder() -> type[ConstLadder]:
    return ConstLadder


@pytest.fixture
def run_info() -> RunInfo:
    return RunInfo("kmeans-assign", "h200", "-", 0, Budgets(), {"shape": {"B": 32, "N": 65536, "K": 1024, "D": 128},
                                                               "dtype": "bf16"})  # fmt: skip


@pytest.fixture
def seed() -> Callable[..., Parent]:
    """A committed schedule as a round-0 parent (its ``how`` is what the loop records for a ``--from`` file)."""

    def make(name: str, ms: float | None = None, measured: bool = False) -> Parent:
        module = pipeline.load(SCHEDULES / f"{name}.cake").module
        return Parent(module, structural_hash(module), name, ms, measured, f"read from {SCHEDULES / name}.cake")

    return make
