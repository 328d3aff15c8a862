"""The ``pipe-operand`` tactic: stage a consumer's per-stage global operand through the pipe that feeds it.

In a warp-specialized kernel the consumers of a pipe often read, beside the stage's tiles, a small global
slice that moves with the stage (``argmin.update bv, bi <- acc, c_sq[b, kt * BN : +BN], base=kt * BN,
oob=skip``): every consumer thread then loads its share from global memory in the epilogue of every
stage. The rewrite adds a ring of the pipe's stage count for that slice, has the producer copy it with
TMA into the stage it has just acquired (the pipe's transaction bytes grow by the copy: the compiler
derives them), and makes the consumer read it from the stage it waits on::

    smem c_sq_s: f32[S][BN] align 128
    pipe cring: producer -> consumers of cs, c_sq_s
    ... producer, after the stage's other copies:
        tma.load c_sq_s[s] <- c_sq[b, kt * BN : +BN]
    ... consumer:
        argmin.update bv, bi <- acc, c_sq_s[s], base=kt * BN, scale=-2.0, limit=K

Where the consumer released the stage before the operation (its tiles were read by then), the release
moves to just after it: the stage now also holds the slice. The out-of-bounds mask moves into the
operation's ``limit``: a TMA copy fills the part of the box past
the tensor's end, so the stage has no bounds of its own, and the columns at or past the old extent are
skipped as they were. A TMA tensor needs rows that start on 16-byte boundaries; where the slice's tensor
is a program buffer whose rows cannot be shown to (``f32[B, K]`` for any K), the buffer's rows are padded
to whole 16 bytes and every kernel launched with it takes their padded length as a new size name
(``KP``, with ``KP % 4 == 0`` and ``KP >= K`` in its domain). Nothing reads the padding: the buffer's
writers mask their stores at the padded length with values of rows that do not exist, and the consumer's
``limit`` skips them.

Precondition: the kernel has a pipe whose producer acquires a stage at exactly one place; the operand is
a read of a global parameter, indexed by single positions and one trailing slice whose start is the
operation's ``base``, masked with ``oob=skip``, by an operation whose primitive takes ``limit`` and that
runs while the consumer holds a stage of the pipe; every name of the index is defined the same way where
the producer acquires (the same loop or ``let``), so the producer copies the tile the consumer reads; a
padded tensor is a buffer of the program, not one of its parameters; and the rewrite fits
(:func:`cake_tactics_core.fit.fits`: TMA alignment, shared memory, the pipe protocol).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.printer import expr as print_expr
from cake_core.loop.tactic import Application

from cake_tactics_core.construct import Fresh
from cake_tactics_core.fit import names_in, offered

if TYPE_CHECKING:
    from cake_core.target import Target

#: bytes of each element type a padded tensor may hold (TMA rows start on 16-byte boundaries)
_BYTES = {"f32": 4, "i32": 4, "u32": 4, "bf16": 2, "f16": 2}


@attrs.frozen
class _Scope:
    """The definitions in force at a statement: a name's defining ``for`` or ``let``, printed."""

    defs: tuple[tuple[str, str], ...] = ()

    def bind(self, st: n.Stmt) -> _Scope:
        if isinstance(st, n.For):
            step = print_expr(st.step) if st.step is not None else "1"
            text = f"for {print_expr(st.start)} .. {print_expr(st.stop)} step {step}"
            return _Scope((*self.defs, (st.var, text)))
        if isinstance(st, n.Let):
            return _Scope((*self.defs, (st.name, f"let {print_expr(st.value)}")))
        return self

    def lookup(self, name: str) -> str | None:
        return next((text for var, text in reversed(self.defs) if var == name), None)


def _walk(body: tuple[n.Stmt, ...], scope: _Scope, held: dict[str, str]) -> Iterator[tuple[n.Stmt, _Scope, dict]]:
    """Every statement of ``body`` with the definitions in force and the pipe stages held (pipe -> stage name)."""
    for st in body:
        if isinstance(st, n.Op) and st.name in ("pipe.wait", "pipe.acquire") and st.outs and st.ins:
            held = {**held, _ident(st.ins[0]): _ident(st.outs[0])}
        yield st, scope, held
        inner = scope.bind(st)
        if isinstance(st, n.For):
            yield from _walk(st.body, inner, held)
        elif isinstance(st, n.If):
            yield from _walk(st.then, scope, held)
            yield from _walk(st.orelse, scope, held)
        scope = inner if isinstance(st, n.Let) else scope


def _ident(e: n.Expr) -> str:
    """The name an operand spells: ``s`` or ``cring``."""
    return e.name if isinstance(e, n.Ref) else e.id if isinstance(e, n.Name) else ""


@attrs.frozen
class _Site:
    pipe: str
    role: str
    op: n.Op
    operand: int  # position in the op's ins
    ref: n.Ref
    stage: str  # the consumer's stage name
    acquire: n.Op  # the producer's pipe.acquire

    @property
    def name(self) -> str:
        return f"{self.role}:{self.op.name}:{print_expr(self.ref)}"


def _is_word(e: n.Expr | None, word: str) -> bool:
    return isinstance(e, n.Name) and e.id == word


def _same(a: n.Expr, b: n.Expr) -> bool:
    return print_expr(a) == print_expr(b)


def _takes_limit(op_name: str) -> bool:
    from cake_core import plugins

    prim = plugins.registry().by_name("primitives").get(op_name)
    return prim is not None and any(a.name == "limit" for a in prim.signature.attrs)


def _acquires(kernel: n.Kernel, pipe: n.Pipe) -> list[tuple[n.Op, _Scope]]:
    role = next((r for r in kernel.roles if r.name == pipe.producers[0]), None)
    if role is None:
        return []
    return [
        (st, scope)
        for st, scope, _ in _walk(role.body, _Scope(), {})
        if isinstance(st, n.Op) and st.name == "pipe.acquire" and st.ins and _ident(st.ins[0]) == pipe.name
    ]


def sites(kernel: n.Kernel) -> list[_Site]:
    """Where the rewrite could apply in ``kernel`` (before the fit check)."""
    out = []
    for pipe in kernel.pipes:
        acquires = _acquires(kernel, pipe)
        if len(acquires) != 1:
            continue
        acquire, pscope = acquires[0]
        for role in kernel.roles:
            if role.name not in pipe.consumers:
                continue
            for st, scope, held in _walk(role.body, _Scope(), {}):
                if not isinstance(st, n.Op) or pipe.name not in held or not _is_word(st.attr("oob"), "skip"):
                    continue
                if st.attr("limit") is not None or st.attr("base") is None or not _takes_limit(st.name):
                    continue
                for i, ref in enumerate(st.ins):
                    param = kernel.param(ref.name) if isinstance(ref, n.Ref) else None
                    if param is None or param.tier != "global" or len(ref.index) != len(param.shape):
                        continue
                    *heads, last = ref.index
                    if not all(isinstance(x, n.At) for x in heads) or not isinstance(last, n.Span):
                        continue
                    if not _same(last.start, st.attr("base")):
                        continue
                    local = {v for v, _ in scope.defs}
                    if any(scope.lookup(x) != pscope.lookup(x) for x in names_in(ref) if x in local):
                        continue
                    out.append(_Site(pipe.name, role.name, st, i, ref, held[pipe.name], acquire))
    return out


def _fresh(module: n.Module, kernel: n.Kernel, stem: str) -> str:
    """A name free in ``kernel`` and among the module's kernels."""
    fresh = Fresh(kernel)
    name = fresh(stem)
    while any(k.name == name for k in module.kernels):
        name = fresh(stem)
    return name


class PipeOperand:
    """One application per consumer operand that moves with a pipe's stages."""

    name = "pipe-operand"
    precondition = (
        "a consumer operation masked with oob=skip whose primitive takes `limit` reads, while it holds a stage "
        "of a pipe, a global slice starting at its `base` whose index the producer defines the same way where "
        "it acquires that stage (its only acquire); a tensor whose rows need padding for TMA is a program "
        "buffer; the rewrite fits the target"
    )

    def applications(self, module: n.Module, target: Target) -> Sequence[Application]:
        if not target.has("tma"):
            return []
        candidates = [
            Application(self.name, f"{kernel.name}:{site.name}", {})
            for kernel in module.kernels
            for site in sites(kernel)
        ]
        return offered(self, module, target, candidates)

    def apply(self, module: n.Module, target: Target, application: Application) -> n.Module:
        kernel_name, _, site_name = application.site.partition(":")
        kernel = next(k for k in module.kernels if k.name == kernel_name)
        site = next(s for s in sites(kernel) if s.name == site_name)
        return _staged(module, kernel, site)


def _staged(module: n.Module, kernel: n.Kernel, site: _Site) -> n.Module:
    param = kernel.param(site.ref.name)
    assert param is not None
    pipe = kernel.pipe(site.pipe)
    assert pipe is not None
    ring = kernel.buffer(pipe.buffers[0])
    assert ring is not None and ring.stages is not None
    size = site.ref.index[-1].size  # type: ignore[attr-defined]
    buf = _fresh(module, kernel, f"{param.name}_s")
    stage_ref = n.Ref(buf, (n.At(n.Name(site.stage)),))
    extent = param.shape[-1]

    def consumer(body: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        out: list[n.Stmt] = []
        held_back: n.Stmt | None = None  # a release of the stage before the operation, moved after it
        for st in body:
            if st is site.op:
                ins = tuple(stage_ref if i == site.operand else e for i, e in enumerate(st.ins))
                kept = tuple(a for a in st.attrs if a.key != "oob")
                st = attrs.evolve(st, ins=ins, attrs=(*kept, n.Attr("limit", extent)))
                out.append(st)
                if held_back is not None:
                    out.append(held_back)
                    held_back = None
                continue
            if _releases(st, pipe.name, site.stage) and any(x is site.op for x in body):
                held_back = st
                continue
            if isinstance(st, n.For):
                st = attrs.evolve(st, body=consumer(st.body))
            elif isinstance(st, n.If):
                st = attrs.evolve(st, then=consumer(st.then), orelse=consumer(st.orelse))
            out.append(st)
        if held_back is not None:
            out.append(held_back)
        return tuple(out)

    copy = n.Op(name="tma.load", outs=(n.Ref(buf, (n.At(n.Name(_ident(site.acquire.outs[0]))),)),), ins=(site.ref,))

    def producer(body: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        out: list[n.Stmt] = []
        after = None
        for st in body:
            if isinstance(st, n.For):
                st = attrs.evolve(st, body=producer(st.body))
            elif isinstance(st, n.If):
                st = attrs.evolve(st, then=producer(st.then), orelse=producer(st.orelse))
            out.append(st)
            if st is site.acquire or (after is not None and _copies_into(st, pipe)):
                after = len(out)
        if after is not None:
            out.insert(after, copy)
        return tuple(out)

    roles = []
    for role in kernel.roles:
        if role.name == site.role:
            role = attrs.evolve(role, body=consumer(role.body))
        if role.name == pipe.producers[0]:
            role = attrs.evolve(role, body=producer(role.body))
        roles.append(role)
    smem = n.Smem(buf, param.dtype, (size,), stages=ring.stages, align=n.Num(128))
    pipes = tuple(attrs.evolve(p, buffers=(*p.buffers, buf)) if p.name == pipe.name else p for p in kernel.pipes)
    kernel2 = attrs.evolve(kernel, roles=tuple(roles), smem=(*kernel.smem, smem), pipes=pipes)
    module = attrs.evolve(module, kernels=tuple(kernel2 if k.name == kernel.name else k for k in module.kernels))
    return _padded(module, kernel2, param)


def _releases(st: n.Stmt, pipe: str, stage: str) -> bool:
    """Whether ``st`` is ``pipe.release PIPE[STAGE]``."""
    if not (isinstance(st, n.Op) and st.name == "pipe.release" and st.ins and isinstance(st.ins[0], n.Ref)):
        return False
    ref = st.ins[0]
    return ref.name == pipe and len(ref.index) == 1 and _is_word(getattr(ref.index[0], "expr", None), stage)


def _copies_into(st: n.Stmt, pipe: n.Pipe) -> bool:
    return isinstance(st, n.Op) and st.name == "tma.load" and bool(st.outs) and _ident(st.outs[0]) in pipe.buffers


def _aligned(kernel: n.Kernel, extent: n.Expr, quantum: int) -> bool:
    """Whether ``extent`` is a whole number of ``quantum`` elements wherever the kernel's domain holds."""
    if isinstance(extent, n.Num):
        return extent.value % quantum == 0
    if isinstance(extent, n.Name):
        for c in kernel.domain:
            if c.var != extent.id or not c.values:
                continue
            if c.op == "%" and isinstance(c.values[0], n.Num) and c.values[0].value % quantum == 0:
                return True
            if c.op == "in" and all(isinstance(v, n.Num) and v.value % quantum == 0 for v in c.values):
                return True
    return False


def _padded(module: n.Module, kernel: n.Kernel, param: n.Param) -> n.Module:
    """``module`` with the tensor behind ``param`` padded to 16-byte rows, where they are not already."""
    quantum = 16 // _BYTES.get(param.dtype, 16) if param.dtype in _BYTES else 0
    if quantum <= 1 or _aligned(kernel, param.shape[-1], quantum):
        return module
    program = module.program
    launch = next((x for x in program.launches if x.kernel == kernel.name), None) if program else None
    position = [p.name for p in kernel.params].index(param.name)
    arg = launch.args[position] if launch is not None and position < len(launch.args) else None
    buffer = next((b for b in program.buffers if b.name == arg), None) if program and arg else None
    if buffer is None:  # a program parameter (or a bare kernel): its rows are the caller's; the fit check refuses
        return module
    q = n.Num(quantum)
    padded_rows = n.Bin("*", n.Call("cdiv", (buffer.shape[-1], q)), q)
    buffers = tuple(attrs.evolve(b, shape=(*b.shape[:-1], padded_rows)) if b is buffer else b for b in program.buffers)
    kernels = []
    for k in module.kernels:
        for x in program.launches:
            if x.kernel != k.name or arg not in x.args:
                continue
            p = k.params[x.args.index(arg)]
            old = p.shape[-1]
            size = _fresh(module, k, f"{print_expr(old)}P" if isinstance(old, n.Name) else "RP")
            params = tuple(attrs.evolve(pp, shape=(*pp.shape[:-1], n.Name(size))) if pp is p else pp for pp in k.params)
            domain = (*k.domain, n.Constraint(size, "%", (q,)), n.Constraint(size, ">=", (old,)))
            k = attrs.evolve(k, params=params, domain=domain)
        kernels.append(k)
    return attrs.evolve(module, program=attrs.evolve(program, buffers=buffers), kernels=tuple(kernels))
