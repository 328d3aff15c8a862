"""Which elements of a kernel's outputs every CTA and role instance writes, at concrete sizes: the
elements no one writes (holes) and those two writers write (overlaps).

Control flow in Cake IR never depends on data, so the global stores of one role instance of one CTA
are a function of the sizes, the grid coordinates and ``self``. At a few samples of the kernel's
shape domain (:func:`coverage_samples`: the least sizes, and *ragged* ones where each size the kernel
divides by a constant is one and two tiles plus a part of a tile, so that floor and ceiling division
differ and persistent loops take several trips), every CTA of the grid and every role instance is
walked with the protocol simulator's machinery (:func:`cake_core.verify.traces.simulate` over
programs of the global writes, :func:`plans`), and each written element of each output is marked
with its writer.

**Outputs** are the global parameters the kernel writes that are bound to parameters of the module's
program by its launches (for a kernel the program does not launch, every written global parameter);
program buffers are intermediate, and a tensor the kernel also reads, or updates with atomics, is
excluded (what is not written keeps its value on purpose). Boxes are clipped to the tensor: a masked
store (``oob=skip``) writes only in-bounds elements, and CR108 owns unmasked ones (an output an unmasked
store leaves at some sample has no holes reported there: the launch faults).

Budget: at most :data:`MAX_ELEMENTS` elements per output and :data:`MAX_STEPS` write operations per
sample, over at most :data:`MAX_CTAS` CTAs; a sample past them is skipped (``Coverage.skipped``).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.exprs import Compiled, EvalError
from cake_core.ir.model import CheckedModule, KernelModel
from cake_core.ir.primitive import Access, Kind
from cake_core.location import UNKNOWN, Loc
from cake_core.verify.analyses import for_model
from cake_core.verify.facts import KernelFacts, facts
from cake_core.verify.protocol import protocol_key
from cake_core.verify.samples import Sample, Sizes, sizes
from cake_core.verify.traces import Plan, Program, box_fns, compiler, program, simulate

MAX_ELEMENTS = 1 << 20  # elements of one output at one sample
MAX_STEPS = 20000  # write operations (and binds) of one sample, every CTA together
MAX_CTAS = 1024  # CTAs of one sample


@attrs.frozen
class Writer:
    """One role instance of one CTA, and the store it wrote with."""

    cta: tuple[tuple[str, int], ...]
    who: str
    loc: Loc

    @property
    def words(self) -> str:
        grid = ", ".join(f"{k}={v}" for k, v in self.cta)
        return f"CTA ({grid}) {self.who}" if grid else self.who


@attrs.frozen
class Hole:
    """Elements of an output no writer wrote at one sample."""

    tensor: str
    sample: Sample
    index: tuple[int, ...]  # the first unwritten element
    missing: int
    total: int
    dims: tuple[int, ...]  # dimensions whose coordinate of ``index`` no store ever writes


@attrs.frozen
class Overlap:
    """An element two writers wrote at one sample."""

    tensor: str
    sample: Sample
    index: tuple[int, ...]
    first: Writer
    second: Writer


@attrs.define(eq=False)
class Coverage:
    """The holes and overlaps of one kernel model's outputs, over its samples."""

    outputs: tuple[str, ...]
    holes: list[Hole] = attrs.field(factory=list)
    overlaps: list[Overlap] = attrs.field(factory=list)
    skipped: list[str] = attrs.field(factory=list)


def outputs(checked: CheckedModule, model: KernelModel, kf: KernelFacts) -> tuple[str, ...]:
    """The kernel's outputs (see the module docstring), in parameter order."""
    k = model.kernel
    written, excluded = set(), set()
    for of in kf.ops:
        for e in of.effects:
            if e.tier is not Kind.GLOBAL or e.operand.name is None or e.access is Access.NONE:
                continue
            if e.access is Access.WRITE and not e.atomic:
                written.add(e.operand.name)
            else:
                excluded.add(e.operand.name)
    prog = checked.module.entry
    bound = [dict(zip(k.params, la.args, strict=False)) for la in prog.launches if la.kernel == k.name]
    names = {p.name for p in prog.params}
    out = []
    for p in k.params:
        if p.tier != "global" or p.name not in written or p.name in excluded:
            continue
        if not bound or any(b.get(p) in names for b in bound):
            out.append(p.name)
    return tuple(out)


def plans(model: KernelModel, kf: KernelFacts, comp: Compiled, tensors: tuple[str, ...]) -> dict[int, Plan]:
    """For every operation, a plan of its writes to ``tensors`` (as accesses of whole boxes, each
    dimension a start and a size) and of the names it binds: what :func:`~cake_core.verify.traces.program`
    and :func:`~cake_core.verify.traces.simulate` walk."""
    params = {p.name: p for p in model.kernel.params}
    zero = comp(n.Num(0))
    out = {}
    for of in kf.ops:
        accesses = []
        for e in of.effects:
            o = e.operand
            if e.tier is not Kind.GLOBAL or e.access is not Access.WRITE or o.name not in tensors:
                continue
            dims = box_fns(o.index, params[o.name].shape, comp, lambda ext: (zero, comp(ext)))
            accesses.append((o.name, False, dims, (False, True, False, False, False), e))
        binds = [(b.name, comp(b.value)) for b in of.prim.binds(of.typed)]
        out[id(of.typed.op)] = Plan(of, [], [], [], accesses, None, bool(accesses or binds), binds=binds)
    return out


def coverage_samples(s: Sizes) -> list[Sample]:
    """The least sizes, and sizes one and two tiles plus part of a tile past them for each size the
    kernel divides by a constant (completed to the domain's relations); duplicates once."""
    out = [Sample(s.small, s.sms)]
    for k in (1, 2):
        grown = {}
        for (name, least), (_, lo, hi, mod, unit) in zip(s.small, s.ranges, strict=True):
            v = least
            if unit > 1:
                v = -(-max(lo, k * unit + unit // 2 + 1) // mod) * mod
                if hi is not None and v > hi:
                    v = least
            grown[name] = v
        full = s.shape.complete(grown)
        if full is not None:
            sample = Sample(tuple((name, full[name]) for name, _ in s.small), s.sms)
            if sample not in out:
                out.append(sample)
    return out


def coverage(checked: CheckedModule, model: KernelModel) -> Coverage:
    """The coverage of ``model``'s outputs, computed once per :func:`~cake_core.verify.protocol.protocol_key`
    within a checked module whose analyses are attached."""
    table = for_model(model)
    if table is None:
        return _cover(checked, model)
    return table.get("coverage", protocol_key(model), lambda: _cover(checked, model))


class _Marks:
    """One output at one sample: which writer wrote each element, and each dimension's written coordinates."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self.written = bytearray(math.prod(shape))
        self.owner = array("i", bytes(4 * len(self.written)))
        self.seen = [bytearray(x) for x in shape]
        self.overlap: tuple[int, int, int] | None = None  # (flat index, first writer, second writer)

    def write(self, box: tuple[tuple[int, int], ...], wid: int, agents: list[tuple]) -> None:
        """Marks the in-bounds part of ``box`` written by writer ``wid``; the first element another
        agent (``agents[wid]``: a CTA and a role instance) wrote before is kept as the overlap."""
        clipped = [(max(lo, 0), min(hi, ext)) for (lo, hi), ext in zip(box, self.shape, strict=True)]
        if any(lo >= hi for lo, hi in clipped):
            return
        for d, (lo, hi) in enumerate(clipped):
            self.seen[d][lo:hi] = b"\x01" * (hi - lo)
        lo, hi = clipped[-1]
        width = hi - lo
        for lead in _points(clipped[:-1]):
            base = 0
            for i, ext in zip(lead, self.shape[:-1], strict=True):
                base = base * ext + i
            a = base * self.shape[-1] + lo
            b = a + width
            if self.overlap is None and self.written[a:b].count(0) != width:
                me = agents[wid]
                for j in range(a, b):
                    if self.written[j] and agents[self.owner[j]] != me:
                        self.overlap = (j, self.owner[j], wid)
                        break
            self.written[a:b] = b"\x01" * width
            self.owner[a:b] = array("i", [wid]) * width

    def index(self, flat: int) -> tuple[int, ...]:
        out = []
        for ext in reversed(self.shape):
            flat, r = divmod(flat, ext)
            out.append(r)
        return tuple(reversed(out))


def _points(box: list[tuple[int, int]]) -> Iterator[tuple[int, ...]]:
    if not box:
        yield ()
        return
    (lo, hi), rest = box[0], box[1:]
    for i in range(lo, hi):
        for tail in _points(rest):
            yield (i, *tail)


def _cover(checked: CheckedModule, model: KernelModel) -> Coverage:
    kf = facts(model)
    tensors = outputs(checked, model, kf)
    cov = Coverage(tensors)
    s = sizes(model) if tensors else None
    if s is None:
        return cov
    comp = compiler(model)
    ps = plans(model, kf, comp, tensors)
    programs: dict[str, Program] = {info.role.name: program(info.role.body, ps, comp) for info in model.roles}
    params = {p.name: p for p in model.kernel.params}
    for sample in coverage_samples(s):
        env = dict(model.env)
        env.update(sample.sizes)
        if sample.sms is not None:
            env["SMS"] = sample.sms
        try:
            extents = [int(comp(e)(env)) for e in model.kernel.grid.extents]
            shapes = {t: tuple(int(comp(x)(env)) for x in params[t].shape) for t in tensors}
        except (EvalError, ZeroDivisionError, TypeError, ValueError, OverflowError) as exc:
            cov.skipped.append(f"an extent has no value{sample.when} ({exc})")
            continue
        if math.prod(extents) > MAX_CTAS or any(math.prod(x) > MAX_ELEMENTS for x in shapes.values()):
            cov.skipped.append(f"too large to walk{sample.when}")
            continue
        _walk(model, sample, programs, extents, shapes, cov)
    return cov


def _walk(model: KernelModel, sample: Sample, programs: dict[str, Program], extents: list[int],
          shapes: dict[str, tuple[int, ...]], cov: Coverage) -> None:  # fmt: skip
    marks = {t: _Marks(x) for t, x in shapes.items()}
    writers: dict[tuple, int] = {}  # (CTA, instance, store) -> writer id, from 1
    found: list[Writer] = [Writer((), "", UNKNOWN)]  # writer id -> writer (0: nobody)
    agents: list[tuple] = [()]  # writer id -> (CTA, instance)
    faults: set[str] = set()
    budget = MAX_STEPS
    grid = model.kernel.grid.vars
    for rev in _points([(0, x) for x in reversed(extents)]):
        cta = tuple(zip(grid, reversed(rev), strict=True))
        run = simulate(model, sample, programs, budget, dict(cta))
        if run.skipped is not None:
            cov.skipped.append(f"{run.skipped}{sample.when}")
            return
        for inst, trace in zip(run.instances, run.traces, strict=True):
            budget -= len(trace)
            for step in trace:
                for acc in step.accesses:
                    key = (cta, inst.index, step.op.loc)
                    wid = writers.get(key)
                    if wid is None:
                        wid = writers[key] = len(found)
                        found.append(Writer(cta, inst.who, step.op.loc))
                        agents.append((cta, inst.index))
                    m = marks[acc.buffer]
                    if not acc.effect.masked and any(lo < 0 or hi > ext for (lo, hi), ext in zip(acc.box, m.shape,
                                                                                                   strict=True)):
                        faults.add(acc.buffer)  # the launch faults (CR108): its holes are a consequence
                    m.write(acc.box, wid, agents)
    for t, m in marks.items():  # the first sample that shows a mistake in a tensor names it
        if m.overlap is not None and all(o.tensor != t for o in cov.overlaps):
            flat, first, second = m.overlap
            cov.overlaps.append(Overlap(t, sample, m.index(flat), found[first], found[second]))
        zero = m.written.find(0)
        if zero >= 0 and t not in faults and all(h.tensor != t for h in cov.holes):
            index = m.index(zero)
            dims = tuple(d for d, i in enumerate(index) if not m.seen[d][i])
            cov.holes.append(Hole(t, sample, index, m.written.count(0), len(m.written), dims))

