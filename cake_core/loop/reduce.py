"""Shrinking a Cake module's source while a predicate keeps holding: the minimal ``.cake`` reproducer a
routed finding carries.

:func:`reduce` takes a text and a predicate (``still_fails(text) -> bool``, true of the text itself) and
returns the smallest text it found on which the predicate still holds, within a deadline. It works on
the parsed module: each step removes or simplifies one piece of it, prints the result canonically
(:func:`cake_core.ir.printer.print_module`) and keeps it when the text is smaller, by lines and then by
characters, and the predicate holds. The passes, repeated until a round keeps nothing:

1. **kernels**: unlaunched kernels, launches (with the kernels they alone launched), the program itself;
2. **roles** of every kernel;
3. **statements** of every block, outermost first, in halving chunks (ddmin);
4. **blocks**: a ``for`` replaced by its body (its variable bound to its start by a ``let``), an ``if``
   by either branch, an ``else`` dropped;
5. **unused declarations**: constants, shared buffers, barriers, pipes, domain clauses, program buffers
   and parameters, kernel parameters (with the launch arguments that fill them), whose names nothing
   else in the text mentions;
6. **lets**: a ``let`` of a name or a number forwarded into its uses;
7. **constants**: each constant folded to its number where every specialization agrees on it; each
   constant's, ``let``'s, attribute's and loop bound's expression replaced by ``0`` or a part of it no
   larger than it (a term of a sum, a factor of a product, an argument of ``max``: never a numerator,
   which turned a ring of 8 stages into one of 512 and a gate run of a second into one that ran for
   minutes).

The finite domain sets (``D in {64, 128, 256}``, in every domain at once) are cut to one value first:
every later test then verifies one specialization instead of six.

A text that does not parse, or whose canonical print no longer satisfies the predicate (a finding
about a comment, or a syntax error), is reduced by deleting chunks of lines instead.

:mod:`cake_core.loop.reproduces` makes the predicates stage 4 and ``cake reduce`` use.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence

import attrs

from cake_core.diagnostics.diagnostic import DiagnosticError
from cake_core.errors import CakeError
from cake_core.ir import nodes as n
from cake_core.ir import printer
from cake_core.ir.exprs import substitute, try_int
from cake_core.ir.parser import parse
from cake_core.ir.sema import specs

Predicate = Callable[[str], bool]


class NotReproduced(CakeError):
    """The predicate does not hold of the text to reduce: there is nothing to reproduce (exit 1)."""

    exit_code = 1


@attrs.frozen
class Reduction:
    """What :func:`reduce` made: the reduced text and how far it got.

    ``method`` is ``"structural"`` (the parsed module, printed canonically) or ``"lines"`` (chunks of
    lines). ``tests`` counts the predicate's calls (the original's included; a text seen twice is asked
    once); ``kept`` the steps kept; ``errors`` the candidates on which the predicate raised (counted as
    not holding), the first one's message in ``first_error``.
    """

    text: str
    method: str
    lines_before: int
    lines_after: int
    chars_before: int
    chars_after: int
    tests: int
    kept: int
    hit_deadline: bool
    seconds: float
    errors: int = 0
    first_error: str | None = None

    @property
    def smaller(self) -> bool:
        return (self.lines_after, self.chars_after) < (self.lines_before, self.chars_before)

    def summary(self) -> str:
        """One line: lines before and after, steps, and whether the deadline stopped it."""
        stop = "stopped at the deadline or the call limit" if self.hit_deadline else "no smaller text holds"
        return (f"{self.lines_before} -> {self.lines_after} lines, {self.chars_before} -> {self.chars_after} "
                f"characters ({self.method}): {self.kept} step(s) kept of {self.tests} tested in "
                f"{self.seconds:.2f}s, {stop}")  # fmt: skip


def size(text: str) -> tuple[int, int]:
    """What "smaller" compares: lines, then characters."""
    return (text.count("\n") + (0 if text.endswith("\n") or not text else 1), len(text))


class _OutOfTime(Exception):
    pass


class _Search:
    """The predicate behind a memo and the deadline, and the best text so far."""

    def __init__(self, still_fails: Predicate, text: str, end: float, max_tests: int | None = None) -> None:
        self.still_fails, self.end, self.max_tests = still_fails, end, max_tests
        self.memo: dict[str, bool] = {}
        self.tests = self.kept = self.errors = 0
        self.first_error: str | None = None
        self.hit_deadline = False
        self.text = text

    def holds(self, text: str) -> bool:
        if text in self.memo:
            return self.memo[text]
        if time.monotonic() >= self.end or (self.max_tests is not None and self.tests >= self.max_tests):
            self.hit_deadline = True
            raise _OutOfTime
        self.tests += 1
        try:
            ok = bool(self.still_fails(text))
        except Exception as exc:  # a candidate the predicate cannot judge does not reproduce the finding
            ok = False
            self.errors += 1
            if self.first_error is None:
                self.first_error = f"{type(exc).__name__}: {exc}"
        self.memo[text] = ok
        return ok

    def take(self, text: str) -> bool:
        """Keep ``text`` if it is smaller than the best so far and the predicate holds of it."""
        if size(text) >= size(self.text) or not self.holds(text):
            return False
        self.text = text
        self.kept += 1
        return True


def reduce(text: str, still_fails: Predicate, *, deadline_s: float, max_tests: int | None = None) -> Reduction:
    """The smallest text found within ``deadline_s`` seconds and ``max_tests`` calls of ``still_fails`` on
    which it holds.

    ``still_fails`` must hold of ``text`` (else :class:`NotReproduced`); the answer always satisfies it,
    and is ``text`` itself when nothing smaller does. The deadline is checked before each call of the
    predicate, so the reduction ends at most one call after it. A limit on calls instead of time makes the
    answer the same on every machine (for a deterministic predicate): ``cake run`` relies on it.
    """
    start = time.monotonic()
    search = _Search(still_fails, text, start + deadline_s, max_tests)
    try:
        if not search.holds(text):
            raise NotReproduced("the predicate does not hold of the text to reduce")
    except _OutOfTime:
        raise NotReproduced("the deadline passed before the text to reduce could be tested") from None
    method = "lines"
    try:
        module = parse(text)
    except DiagnosticError:
        module = None
    try:
        canonical = printer.print_module(module) if module is not None else None
        if canonical is not None and search.holds(canonical):
            method = "structural"
            if size(canonical) < size(text):
                search.text = canonical
                search.kept += 1
            _Structural(search, module).run()
        else:
            _shrink_lines(search)
    except _OutOfTime:
        pass
    out = search.text
    return Reduction(
        out, method, size(text)[0], size(out)[0], len(text), len(out), search.tests, search.kept,
        search.hit_deadline, time.monotonic() - start, search.errors, search.first_error,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------------
# chunks of a sequence (ddmin)
# ---------------------------------------------------------------------------------------------------


def _shrink_seq(get: Callable[[], Sequence | None], attempt: Callable[[tuple], bool]) -> None:
    """Remove chunks of the sequence ``get()`` returns, halving the chunk size down to one item;
    ``attempt(items)`` tries the sequence without a chunk (and keeps it if it is true). ``get`` is asked
    again after each kept step and returns None once the sequence is gone."""
    items = get()
    if not items:
        return
    k = len(items)
    while k >= 1:
        i = 0
        while True:
            items = get()
            if items is None or i >= len(items):
                break
            if not attempt(tuple(items[:i]) + tuple(items[i + k :])):
                i += k
        if items is None:
            return
        k //= 2


def _shrink_lines(search: _Search) -> None:
    def get() -> list[str]:
        return search.text.splitlines(keepends=True)

    while True:
        before = search.text
        _shrink_seq(get, lambda lines: search.take("".join(lines)))
        if search.text == before:
            return


# ---------------------------------------------------------------------------------------------------
# the parsed module
# ---------------------------------------------------------------------------------------------------

#: a block of statements: (kernel index, role index, ((statement index, field), ...)) where each field
#: is "body" (of a ``for``), "then" or "orelse" (of an ``if``)
BodyPath = tuple[int, int, tuple[tuple[int, str], ...]]
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _get_body(m: n.Module, path: BodyPath) -> tuple[n.Stmt, ...] | None:
    ki, ri, steps = path
    if ki >= len(m.kernels) or ri >= len(m.kernels[ki].roles):
        return None
    body = m.kernels[ki].roles[ri].body
    for idx, field in steps:
        if idx >= len(body):
            return None
        s = body[idx]
        if not (isinstance(s, n.For) and field == "body" or isinstance(s, n.If) and field in ("then", "orelse")):
            return None
        body = getattr(s, field)
    return body


def _set_body(m: n.Module, path: BodyPath, new: Sequence[n.Stmt]) -> n.Module:
    ki, ri, steps = path

    def put(body: tuple[n.Stmt, ...], rest: tuple[tuple[int, str], ...]) -> tuple[n.Stmt, ...]:
        if not rest:
            return tuple(new)
        (idx, field), tail = rest[0], rest[1:]
        s = attrs.evolve(body[idx], **{field: put(getattr(body[idx], field), tail)})
        return body[:idx] + (s,) + body[idx + 1 :]

    k = m.kernels[ki]
    role = attrs.evolve(k.roles[ri], body=put(k.roles[ri].body, steps))
    return _set_kernel(m, ki, attrs.evolve(k, roles=k.roles[:ri] + (role,) + k.roles[ri + 1 :]))


def _set_kernel(m: n.Module, ki: int, k: n.Kernel) -> n.Module:
    return attrs.evolve(m, kernels=m.kernels[:ki] + (k,) + m.kernels[ki + 1 :])


def _bodies(m: n.Module) -> list[BodyPath]:
    """Every block of the module, outermost first."""
    out: list[BodyPath] = []

    def walk(ki: int, ri: int, steps: tuple[tuple[int, str], ...], body: tuple[n.Stmt, ...]) -> None:
        out.append((ki, ri, steps))
        for idx, s in enumerate(body):
            if isinstance(s, n.For):
                walk(ki, ri, steps + ((idx, "body"),), s.body)
            elif isinstance(s, n.If):
                walk(ki, ri, steps + ((idx, "then"),), s.then)
                walk(ki, ri, steps + ((idx, "orelse"),), s.orelse)

    for ki, k in enumerate(m.kernels):
        for ri, r in enumerate(k.roles):
            walk(ki, ri, (), r.body)
    return out


def _mentions(text: str) -> dict[str, int]:
    """How many times each word occurs in ``text``."""
    counts: dict[str, int] = {}
    for w in _WORD.findall(text):
        counts[w] = counts.get(w, 0) + 1
    return counts


class _Structural:
    """The passes over the parsed module (see the module docstring)."""

    def __init__(self, search: _Search, module: n.Module) -> None:
        self.search, self.m = search, module

    def attempt(self, m: n.Module) -> bool:
        if self.search.take(printer.print_module(m)):
            self.m = m
            return True
        return False

    def run(self) -> None:
        passes = (self.domains, self.kernels, self.roles, self.statements, self.blocks, self.declarations,
                  self.lets, self.expressions)  # fmt: skip
        while True:
            before = self.search.kept
            for p in passes:
                p()
            if self.search.kept == before:
                return

    # 1. kernels ------------------------------------------------------------------------------------

    def kernels(self) -> None:
        def launched(m: n.Module) -> set[str]:
            return {launch.kernel for launch in m.entry.launches} if m.kernels else set()

        def spare() -> list[n.Kernel] | None:
            used = launched(self.m)
            return [k for k in self.m.kernels if k.name not in used]

        def without_spare(keep: tuple) -> bool:
            used = launched(self.m)
            return self.attempt(attrs.evolve(self.m, kernels=tuple(k for k in self.m.kernels
                                                                  if k.name in used or k in keep)))  # fmt: skip

        if self.m.kernels:
            _shrink_seq(spare, without_spare)

        def launches() -> tuple[n.Launch, ...] | None:
            return self.m.program.launches if self.m.program is not None else None

        def without_launches(keep: tuple) -> bool:
            prog = attrs.evolve(self.m.program, launches=keep)
            names = {launch.kernel for launch in keep}
            kernels = tuple(k for k in self.m.kernels if k.name in names)
            return self.attempt(attrs.evolve(self.m, program=prog, kernels=kernels))

        _shrink_seq(launches, without_launches)
        prog = self.m.program
        only = self.m.kernel(prog.launches[0].kernel) if prog is not None and len(prog.launches) == 1 else None
        if only is not None:  # the kernel is then the program
            self.attempt(n.Module((only,), None, path=self.m.path))

    # 2. roles ----------------------------------------------------------------------------------------

    def roles(self) -> None:
        for ki in range(len(self.m.kernels)):
            def get(ki: int = ki) -> tuple[n.Role, ...] | None:
                return self.m.kernels[ki].roles if ki < len(self.m.kernels) else None

            def without(keep: tuple, ki: int = ki) -> bool:
                return self.attempt(_set_kernel(self.m, ki, attrs.evolve(self.m.kernels[ki], roles=keep)))

            _shrink_seq(get, without)

    # 3. statements -----------------------------------------------------------------------------------

    def statements(self) -> None:
        for path in _bodies(self.m):
            _shrink_seq(lambda path=path: _get_body(self.m, path),
                        lambda keep, path=path: self.attempt(_set_body(self.m, path, keep)))  # fmt: skip

    # 4. blocks ---------------------------------------------------------------------------------------

    def blocks(self) -> None:
        for path in _bodies(self.m):
            idx = 0
            while (body := _get_body(self.m, path)) is not None and idx < len(body):
                for replacement in _unwrapped(body[idx]):
                    if self.attempt(_set_body(self.m, path, body[:idx] + replacement + body[idx + 1 :])):
                        break
                idx += 1

    # 5. unused declarations --------------------------------------------------------------------------

    def declarations(self) -> None:
        for ki in range(len(self.m.kernels)):
            for field in ("consts", "smem", "barriers", "pipes", "domain", "params"):
                self._unused(lambda m, ki=ki, field=field: _kernel_decls(m, ki, field))
        if self.m.program is not None:
            for field in ("buffers", "domain", "params"):
                self._unused(lambda m, field=field: _program_decls(m, field))

    def _unused(self, decls: Callable[[n.Module], _Decls | None]) -> None:
        """Drop the declarations nothing else in their kernel or program mentions: all at once, else
        one at a time."""
        found = decls(self.m)
        if found is None:
            return
        items, scope, drop = found
        mentions = _mentions(scope)
        unused = [i for name, i in items if mentions.get(name, 0) <= 1]  # its declaration only
        if not unused or self.attempt(drop(self.m, set(unused))):
            return
        for i in sorted(unused, reverse=True):
            self.attempt(drop(self.m, {i}))

    # 6. constants ------------------------------------------------------------------------------------

    def domains(self) -> None:
        """Each finite domain set cut to one value, in every domain of the module at once."""
        sets: dict[str, tuple[n.Expr, ...]] = {}
        for dom in _domains(self.m):
            for c in dom:
                if c.op == "in" and len(c.values) > 1:
                    sets.setdefault(c.var, c.values)
        for var, values in sets.items():
            for v in values:
                if self.attempt(_restrict(self.m, var, v)):
                    break

    def lets(self) -> None:
        """Each ``let`` of a name or a number, bound once in its role, forwarded into its uses."""
        for path in _bodies(self.m):
            idx = 0
            while (body := _get_body(self.m, path)) is not None and idx < len(body):
                s = body[idx]
                if (isinstance(s, n.Let) and isinstance(s.value, (n.Name, n.Num))
                        and _binders(self.m.kernels[path[0]].roles[path[1]].body, s.name) == 1):  # fmt: skip
                    rest = tuple(_forward(t, {s.name: s.value}) for t in body[idx + 1 :])
                    if self.attempt(_set_body(self.m, path, body[:idx] + rest)):
                        continue
                idx += 1

    def expressions(self) -> None:
        """Each constant folded to its number where every specialization gives it the same one; each
        constant's, ``let``'s, attribute's and loop bound's expression replaced by a part of it that is
        no larger (:func:`_lesser_parts`: a reduction must not turn a loop of 4 trips into one of 512)."""
        for ki in range(len(self.m.kernels)):
            for ci, value in _folded(self.m.kernels[ki]).items():
                k = self.m.kernels[ki]
                consts = k.consts[:ci] + (attrs.evolve(k.consts[ci], value=n.Num(value)),) + k.consts[ci + 1 :]
                self.attempt(_set_kernel(self.m, ki, attrs.evolve(k, consts=consts)))
        i = 0
        while i < len(slots := list(_expr_slots(self.m))):
            e, put = slots[i]
            for part in _lesser_parts(e):
                if self.attempt(put(part)):
                    break
            else:
                i += 1


def _folded(k: n.Kernel) -> dict[int, int]:
    """The constants of ``k`` (by index) that are not numbers but have one value in every
    specialization, with that value."""
    values: dict[int, set[int | None]] = {i: set() for i, c in enumerate(k.consts) if not isinstance(c.value, n.Num)}
    for spec in specs(k.domain):
        env = spec.env
        for i, c in enumerate(k.consts):
            v = try_int(c.value, env)
            if v is not None:
                env[c.name] = v
            if i in values:
                values[i].add(v)
    return {i: vs.pop() for i, vs in values.items() if len(vs) == 1 and None not in vs}


def _lesser_parts(e: n.Expr) -> tuple[n.Expr, ...]:
    """What may replace ``e`` without growing it where sizes and indices are non-negative: ``0``, either
    term of a sum, either factor of a product, any argument of ``max``."""
    if isinstance(e, n.Num):
        return ()
    zero = n.Num(0, loc=e.loc)
    if isinstance(e, n.Bin) and e.op in ("+", "*"):
        return (zero, e.left, e.right)
    if isinstance(e, n.Call) and e.fn == "max":
        return (zero, *e.args)
    return (zero,)


def _binders(body: tuple[n.Stmt, ...], name: str) -> int:
    """How many statements of ``body`` bind ``name`` (``let``, ``for``, an operation's output)."""
    count = 0
    for s in n.walk_stmts(body):
        if isinstance(s, (n.Let, n.For)):
            count += (s.name if isinstance(s, n.Let) else s.var) == name
        elif isinstance(s, n.Op):
            count += any(isinstance(o, n.Name) and o.id == name for o in s.outs)
    return count


def _forward(s: n.Stmt, env: dict[str, n.Expr]) -> n.Stmt:
    """``s`` with the names of ``env`` replaced, inside references' indices too."""

    def e(x: n.Expr) -> n.Expr:
        if isinstance(x, n.Ref):
            return attrs.evolve(x, index=tuple(
                attrs.evolve(i, expr=e(i.expr)) if isinstance(i, n.At)
                else attrs.evolve(i, start=e(i.start), size=e(i.size)) if isinstance(i, n.Span) else i
                for i in x.index))  # fmt: skip
        return substitute(x, env)

    def block(body: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        return tuple(_forward(t, env) for t in body)

    if isinstance(s, n.Let):
        return attrs.evolve(s, value=e(s.value))
    if isinstance(s, n.RegDecl):
        return attrs.evolve(s, shape=tuple(map(e, s.shape)))
    if isinstance(s, n.For):
        return attrs.evolve(s, start=e(s.start), stop=e(s.stop), step=None if s.step is None else e(s.step),
                            body=block(s.body))  # fmt: skip
    if isinstance(s, n.If):
        return attrs.evolve(s, cond=e(s.cond), then=block(s.then), orelse=block(s.orelse))
    if isinstance(s, n.Op):
        return attrs.evolve(s, outs=tuple(map(e, s.outs)), ins=tuple(map(e, s.ins)),
                            attrs=tuple(attrs.evolve(a, value=e(a.value)) for a in s.attrs))  # fmt: skip
    return s


def _unwrapped(s: n.Stmt) -> list[tuple[n.Stmt, ...]]:
    """What a block statement may be replaced by: a loop by its body (after ``let VAR = START`` where
    the body uses its variable), an ``if`` by either branch or without its ``else``."""
    if isinstance(s, n.For):
        if s.var in _mentions("\n".join(printer.stmts(s.body, 0))):
            return [(n.Let(name=s.var, value=s.start, loc=s.loc), *s.body)]
        return [s.body]
    if isinstance(s, n.If):
        out = [s.then]
        if s.orelse:
            out += [s.orelse, (attrs.evolve(s, orelse=()),)]
        return out
    return []


#: a kernel's or the program's declarations of one kind as (name, index), the text of the kernel or
#: program (where a declaration that nothing uses is mentioned once), and how to drop some of them
_Decls = tuple[list[tuple[str, int]], str, Callable[[n.Module, set[int]], n.Module]]


def _named(decls: Sequence) -> list[tuple[str, int]]:
    return [(d.var if isinstance(d, n.Constraint) else d.name, i) for i, d in enumerate(decls)]


def _kernel_decls(m: n.Module, ki: int, field: str) -> _Decls | None:
    if ki >= len(m.kernels):
        return None
    k = m.kernels[ki]

    def drop(m: n.Module, gone: set[int]) -> n.Module:
        kernel = m.kernels[ki]
        keep = tuple(d for i, d in enumerate(getattr(kernel, field)) if i not in gone)
        out = _set_kernel(m, ki, attrs.evolve(kernel, **{field: keep}))
        if field == "params" and m.program is not None:  # the launches' arguments that filled them
            prog = m.program
            launches = tuple(
                attrs.evolve(launch, args=tuple(a for i, a in enumerate(launch.args) if i not in gone))
                if launch.kernel == kernel.name else launch
                for launch in prog.launches
            )  # fmt: skip
            out = attrs.evolve(out, program=attrs.evolve(prog, launches=launches))
        return out

    return _named(getattr(k, field)), "\n".join(printer.kernel(k)), drop


def _program_decls(m: n.Module, field: str) -> _Decls | None:
    if m.program is None:
        return None

    def drop(m: n.Module, gone: set[int]) -> n.Module:
        keep = tuple(d for i, d in enumerate(getattr(m.program, field)) if i not in gone)
        return attrs.evolve(m, program=attrs.evolve(m.program, **{field: keep}))

    return _named(getattr(m.program, field)), "\n".join(printer.program(m.program)), drop


def _domains(m: n.Module) -> list[tuple[n.Constraint, ...]]:
    return ([m.program.domain] if m.program is not None else []) + [k.domain for k in m.kernels]


def _restrict(m: n.Module, var: str, value: n.Expr) -> n.Module:
    """``m`` with every ``var in {...}`` clause cut to ``{value}``."""

    def cut(dom: tuple[n.Constraint, ...]) -> tuple[n.Constraint, ...]:
        return tuple(attrs.evolve(c, values=(value,)) if c.var == var and c.op == "in" else c for c in dom)

    prog = attrs.evolve(m.program, domain=cut(m.program.domain)) if m.program is not None else None
    return attrs.evolve(m, program=prog, kernels=tuple(attrs.evolve(k, domain=cut(k.domain)) for k in m.kernels))


def _expr_slots(m: n.Module) -> Iterator[tuple[n.Expr, Callable[[n.Expr], n.Module]]]:
    """Every constant's, ``let``'s, attribute's and loop bound's expression, with how to replace it."""
    for ki, k in enumerate(m.kernels):
        for ci, c in enumerate(k.consts):
            def put_const(e: n.Expr, ki: int = ki, ci: int = ci, k: n.Kernel = k) -> n.Module:
                consts = k.consts[:ci] + (attrs.evolve(k.consts[ci], value=e),) + k.consts[ci + 1 :]
                return _set_kernel(m, ki, attrs.evolve(k, consts=consts))

            yield c.value, put_const
    for path in _bodies(m):
        body = _get_body(m, path)
        assert body is not None  # the paths are this module's
        for idx, s in enumerate(body):
            for e, rebuild in _stmt_exprs(s):
                def put(part: n.Expr, path: BodyPath = path, idx: int = idx, body: tuple = body,
                        rebuild: Callable = rebuild) -> n.Module:  # fmt: skip
                    return _set_body(m, path, body[:idx] + (rebuild(part),) + body[idx + 1 :])

                yield e, put


def _stmt_exprs(s: n.Stmt) -> list[tuple[n.Expr, Callable[[n.Expr], n.Stmt]]]:
    if isinstance(s, n.Let):
        return [(s.value, lambda e: attrs.evolve(s, value=e))]
    if isinstance(s, n.For):
        return [(s.start, lambda e: attrs.evolve(s, start=e)), (s.stop, lambda e: attrs.evolve(s, stop=e))]
    if isinstance(s, n.Op):
        out = []
        for ai, a in enumerate(s.attrs):
            def rebuild(e: n.Expr, ai: int = ai) -> n.Stmt:
                return attrs.evolve(s, attrs=s.attrs[:ai] + (attrs.evolve(s.attrs[ai], value=e),) + s.attrs[ai + 1 :])

            out.append((a.value, rebuild))
        return out
    return []
