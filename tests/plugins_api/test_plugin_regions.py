"""A region of a plugin's memory tier, declared in a kernel with the tier's name as its keyword
(``scratch buf: f32[2][128]``), goes through the core like the core's own declarations: parsed by the
generic form, printed, serialized, hashed, type-checked into ``KernelModel.mems`` with a handle word
in shared memory, held per CTA by the interpreter, and handed to lowerings by ``handle_addr``."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np
import pytest
from cake_core import plugins
from cake_core.hookspecs import hookimpl
from cake_core.ir.hashing import structural_hash
from cake_core.ir.parser import parse
from cake_core.ir.primitive import Access, ExecContext, Kind, Primitive, Signature, Slot, Tier, TypedOp
from cake_core.ir.printer import print_module
from cake_core.ir.sema import check_module
from cake_core.ir.serialize import from_json, to_json
from cake_core.lower.cuda import FileEmitter, KernelLowering
from cake_core.semantics import run_program

SCRATCH = Kind("scratch")


@attrs.define(frozen=True, eq=False)
class ScratchFill(Primitive):
    name = "scratch.fill"
    summary = "fill a region of the `scratch` tier with a value"
    signature = Signature(outs=[Slot("dst", {SCRATCH}, Access.WRITE)], ins=[Slot("value", {Kind.VALUE})])

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        x.write("dst", np.full((128,), float(x.value(op.ins[0].expr)), dtype=np.float32))

    def lower(self, op: TypedOp, ctx) -> None:
        ctx.line(f"// scratch handle at {ctx.handle_addr(op.outs[0])}, holding {ctx.handle(op.outs[0])}")


@attrs.define(frozen=True, eq=False)
class ScratchTake(Primitive):
    name = "scratch.take"
    summary = "copy a region of the `scratch` tier into a register tile"
    signature = Signature(outs=[Slot("dst", {Kind.REGISTERS}, Access.WRITE)], ins=[Slot("src", {SCRATCH})])

    def execute(self, op: TypedOp, x: ExecContext) -> None:
        x.write("dst", x.read("src"))

    def lower(self, op: TypedOp, ctx) -> None:
        ctx.line(f"// take from {ctx.handle(op.ins[0])}")


class ScratchPlugin:
    __name__ = "scratch-plugin"

    @hookimpl
    def cake_register_tiers(self, register: Callable[[Tier], None]) -> None:
        register(Tier(SCRATCH, "a scratch region the plugin allocates"))

    @hookimpl
    def cake_register_primitives(self, register: Callable[[Primitive], None]) -> None:
        register(ScratchFill())
        register(ScratchTake())


KERNEL = """\
kernel k(out: global f32[N, 128])
  domain N >= 1
  grid (t) over (N)
  cta warps 4
  barrier b: mbarrier count 1
  scratch buf: f32[2][128]
  role all warps 0..4:
    reg r: f32[128] layout rows
    scratch.fill buf[1] <- t + 1
    bar.sync
    scratch.take r <- buf[1]
    store out[t, :] <- r
"""


@pytest.fixture(scope="module")
def registry() -> plugins.Registry:
    return plugins.load(extra=[ScratchPlugin()])


def _check(registry, text):  # noqa: ANN001, ANN202
    return check_module(parse(text, "k.cake"), registry.by_name("primitives"), None, registry.by_name("layouts"))


def test_parse_print_json_and_hash(registry) -> None:
    module = parse(KERNEL, "k.cake")
    (mem,) = module.kernels[0].mems
    assert (mem.tier, mem.name, mem.dtype, mem.stages.value) == ("scratch", "buf", "f32", 2)  # type: ignore[union-attr]
    assert print_module(parse(print_module(module))) == print_module(module)
    assert "  scratch buf: f32[2][128]" in print_module(module)
    assert from_json(to_json(module)) == module
    renamed = KERNEL.replace("buf", "scratch")
    assert structural_hash(parse(renamed)) == structural_hash(module)
    assert structural_hash(parse(KERNEL.replace("f32[2][128]", "f32[3][128]"))) != structural_hash(module)


def test_type_checked_with_a_handle_word(registry) -> None:
    checked = _check(registry, KERNEL)
    assert checked.ok, checked.diagnostics
    (model,) = checked.models.values()
    info = model.mems["buf"]
    assert (info.tier, info.stages, info.shape) == ("scratch", 2, (128,))
    assert info.handle == model.barriers["b"].offset + 8  # after the barriers, in shared memory
    assert model.smem_bytes >= info.handle + 4
    fill = model.ops[0]
    assert model.ops[2].ins[0].kind is SCRATCH
    assert fill.outs[0].kind is SCRATCH and fill.outs[0].shape == (128,)
    # the core's primitives alone have no `scratch` tier: one clear error at the declaration
    bare = check_module(parse(KERNEL, "k.cake"), {}, None)
    assert any(d.message == "`scratch` is not a memory tier any loaded primitive takes" for d in bare.diagnostics)


def test_the_interpreter_holds_it_per_cta(registry) -> None:
    checked = _check(registry, KERNEL)
    res = run_program(checked, {}, {"N": 3})
    assert res.findings == []
    # a region is shared by the CTA's threads: without the barrier the take races with the fill
    racy = run_program(_check(registry, KERNEL.replace("    bar.sync\n", "")), {}, {"N": 1})
    assert [f.code.code for f in racy.findings] == ["CS003"]
    np.testing.assert_array_equal(res.outputs["out"], np.repeat([[1.0], [2.0], [3.0]], 128, axis=1))


def test_lowerings_read_its_handle(registry) -> None:
    checked = _check(registry, KERNEL)
    (model,) = checked.models.values()
    target = plugins.registry().get("targets", "b200")
    source = KernelLowering(model, target, "k", FileEmitter()).emit()
    assert f"scratch handle at (cake_smem_base + {model.mems['buf'].handle}u)" in source


def test_the_core_names_no_blackwell_instruction() -> None:
    # Blackwell is a plugin (cake-blackwell): its tier, features and primitives are named there only
    from pathlib import Path

    import cake_core

    root = Path(cake_core.__file__).parent
    named = [str(p.relative_to(root)) for p in root.rglob("*.py") if "tcgen05" in p.read_text().lower()]
    assert named == []


def test_a_pipe_may_hand_on_stages_of_a_region(registry) -> None:
    # a ring of a plugin tier's regions is a pipe's buffer as a shared ring is (its stages take no shared
    # bytes); what fills a stage is the tier's primitives' business (cake-blackwell's tcgen05.commit.stage)
    text = KERNEL.replace("  role all", "  pipe ring: all -> all of buf\n  role all")
    checked = _check(registry, text)
    assert not [d for d in checked.diagnostics if "pipe" in d.message], checked.diagnostics
    (model,) = checked.models.values()
    info = model.pipes["ring"]
    assert (info.stages, info.buffers, info.stage_bytes) == (2, ("buf",), 0)
    assert {"ring.full", "ring.empty"} <= set(model.barriers)
    unknown = _check(registry, KERNEL.replace("  role all", "  pipe ring: all -> all of nope\n  role all"))
    assert any("`nope`, which is not a shared buffer" in d.message for d in unknown.diagnostics)
