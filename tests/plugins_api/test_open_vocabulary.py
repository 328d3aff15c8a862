"""A third party adds a memory tier, a target feature and a register-tile layout without editing the
core: one in-process plugin declares all three, a target that has the feature, and a primitive that
names the tier in a slot and requires the feature. The core checks, verifies and reports them as its own."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import cake_example_plugin
import pytest
from cake_core import plugins
from cake_core.errors import CakeUserError
from cake_core.hookspecs import hookimpl
from cake_core.ir.layouts import CORE_LAYOUTS, LayoutError, LayoutInfo, TileLayout
from cake_core.ir.parser import parse
from cake_core.ir.primitive import CORE_TIERS, Access, Kind, Primitive, Signature, Slot, Tier
from cake_core.ir.sema import check_module
from cake_core.ir.types import DType
from cake_core.target import Feature, Target, TargetFeature
from cake_core.verify.runner import verify_source

DSMEM = Kind("dsmem")
PEER_COPY = Feature("peer.copy")


def _quad(name: str, args: tuple[int, ...], shape: tuple[int, ...], dtype: DType, warps: int) -> LayoutInfo:
    """Four consecutive elements per thread."""
    threads = warps * 32
    if args or len(shape) != 1 or shape[0] != 4 * threads:
        raise LayoutError(f"`quad` holds [{4 * threads}]: four elements per thread of the role instance")
    return LayoutInfo(name, args, shape, dtype, threads, max(1, 4 * dtype.bytes // 4))


QUAD = TileLayout("quad", "four consecutive elements per thread", _quad)
DSMEM_TIER = Tier(DSMEM, "a peer CTA's shared memory in the cluster")
PEER_COPY_FEATURE = TargetFeature(PEER_COPY, "copies between the shared memories of a cluster's CTAs")


@attrs.define(frozen=True, eq=False)
class PeerFill(Primitive):
    """Fills a register tile, or a peer CTA's shared buffer, with a value."""

    name = "peer.fill"
    summary = "fill a tile with a value"
    signature = Signature(
        outs=[Slot("dst", {Kind.REGISTERS, DSMEM}, Access.WRITE)], ins=[Slot("value", {Kind.VALUE})]
    )
    requires = frozenset({PEER_COPY})


def _peer_target() -> Target:
    example = cake_example_plugin.load_target()
    return attrs.evolve(example, name="peer-gpu", features=example.features | {PEER_COPY})


class PeerPlugin:
    """The third party's plugin: one of each."""

    __name__ = "peer-plugin"

    @hookimpl
    def cake_register_features(self, register: Callable[[TargetFeature], None]) -> None:
        register(PEER_COPY_FEATURE)

    @hookimpl
    def cake_register_tiers(self, register: Callable[[Tier], None]) -> None:
        register(DSMEM_TIER)

    @hookimpl
    def cake_register_layouts(self, register: Callable[[TileLayout], None]) -> None:
        register(QUAD)

    @hookimpl
    def cake_register_targets(self, register: Callable[[Target], None]) -> None:
        register(_peer_target())

    @hookimpl
    def cake_register_primitives(self, register: Callable[[Primitive], None]) -> None:
        register(PeerFill())


KERNEL = """\
kernel k(x: global f32[N, 64], out: global f32[N, 64])
  domain N >= 1
  grid (t) over (cdiv(N, 64))
  cta warps 4
  role all warps 0..4:
    reg q: f32[512] layout quad
    peer.fill q <- 0
    scale.rows out[t * 64 : +64, :] <- x[t * 64 : +64, :], oob=skip
"""


@pytest.fixture
def registry() -> plugins.Registry:
    return plugins.load(extra=[PeerPlugin()])


def _check(registry: plugins.Registry, text: str, layouts: dict | None = None):  # noqa: ANN202
    prims = registry.by_name("primitives")
    layouts = registry.by_name("layouts") if layouts is None else layouts
    return check_module(parse(text, "k.cake"), prims, registry.get("targets", "peer-gpu"), layouts)


def test_hook_cake_register_features_declares_a_name_the_core_never_heard_of(registry: plugins.Registry) -> None:
    r = registry.registration("features", "peer.copy")
    assert r.obj is PEER_COPY_FEATURE and r.plugin.name == "peer-plugin"
    assert Feature("peer.copy") is PEER_COPY and registry.get("targets", "peer-gpu").has("peer.copy")
    # the NVIDIA names come from the targets plugin, through the same hook
    assert registry.registration("features", Feature.TMA).plugin.distribution == "cake-targets-nvidia"


def test_hook_cake_register_features_a_target_lacking_it_is_told(registry: plugins.Registry) -> None:
    lacking = verify_source(KERNEL, "k.cake", registry.get("targets", "example-gpu"), registry).diagnostics
    having = verify_source(KERNEL, "k.cake", registry.get("targets", "peer-gpu"), registry).diagnostics
    if "CR101" not in registry.names("rules"):
        pytest.skip("cake-rules-core (CR101) is not installed")
    (missing,) = [d for d in lacking if d.code == "CR101"]
    assert missing.message.startswith("`peer.fill` needs the feature `peer.copy`, which target `example-gpu`")
    assert missing.help == "choose a target with `peer.copy`"
    assert not [d for d in having if d.code == "CR101"]


def test_hook_cake_register_tiers_a_slot_names_the_plugin_tier(registry: plugins.Registry) -> None:
    assert registry.get("tiers", "dsmem") is DSMEM_TIER
    assert [t.name for t in CORE_TIERS] == [registry.get("tiers", t.name).name for t in CORE_TIERS]
    assert registry.registration("tiers", Kind.SHARED).plugin.distribution == "cake-core"
    wrong = KERNEL.replace("peer.fill q <- 0", "peer.fill x <- 0")
    (d,) = _check(registry, wrong).diagnostics
    assert d.message == (
        "operand `dst` of `peer.fill` must be a `dsmem` operand or register tile, but `x` is a global tensor"
    )


def test_hook_cake_register_layouts_a_tile_takes_the_plugin_layout(registry: plugins.Registry) -> None:
    checked = _check(registry, KERNEL)
    assert checked.diagnostics == []
    (model,) = checked.models.values()
    assert model.regs["q"].layout == LayoutInfo("quad", (), (512,), DType.F32, 128, 4)
    misfit = _check(registry, KERNEL.replace("f32[512]", "f32[256]"))
    (d,) = misfit.diagnostics
    assert d.message == "`quad` holds [512]: four elements per thread of the role instance"
    # the core's layouts alone do not know it
    (unknown,) = _check(registry, KERNEL, dict(CORE_LAYOUTS)).diagnostics
    assert unknown.message.startswith("unknown layout `quad` (known: rows, mma_acc,")


def test_a_primitive_naming_an_undeclared_tier_is_refused() -> None:
    class NoTierPlugin(PeerPlugin):
        __name__ = "no-tier-plugin"

        @hookimpl
        def cake_register_tiers(self, register: Callable[[Tier], None]) -> None:
            pass

    with pytest.raises(CakeUserError) as info:
        plugins.load(extra=[NoTierPlugin()])
    assert str(info.value) == (
        "plugin `no-tier-plugin` ((in-process) 0) registered primitive `peer.fill`, which uses the memory tier "
        "`dsmem` that no loaded plugin declares (through `cake_register_tiers`)"
    )


def test_a_second_declaration_of_a_name_conflicts(registry: plugins.Registry) -> None:
    class Again:
        __name__ = "again"

        @hookimpl
        def cake_register_layouts(self, register: Callable[[TileLayout], None]) -> None:
            register(TileLayout("rows", "a second rows", _quad))

    with pytest.raises(CakeUserError, match=r"layout `rows` is registered twice: by cake-core"):
        plugins.load(extra=[Again()])
