"""Reasoning about run-time sizes: does an access stay in bounds for every size in the shape domain?

A kernel's shape domain fixes some sizes to finite sets (those are the specializations: under one of
them they are constants) and leaves the others to run time, constrained by ranges (``N >= 1``,
``N <= 4096``) and divisibility (``N % 8 == 0``); a size without a lower bound ranges from 0, and
scalar parameters are unconstrained integers. Inside the kernel, indices also depend on the grid
variables, ``self`` (the role instance), loop variables and ``let`` names. This module decides, for
one operation's operand, whether every index it can take is inside the extent of what it indexes, for
**every** admissible size and **every** value of those variables.

What is proved
--------------
Index expressions are *linearized*: every integer expression becomes ``c + Σ a·x`` where ``x`` is a
run-time size, a variable, or an *atom* — a sub-expression that is not linear (``e / k``, ``e % k``,
``cdiv(e, k)``, ``min``, ``max``, a product of two non-constant terms). Each obligation is put in the
form ``M >= 0`` (``start >= 0``, ``extent - start - size >= 0``, and for a single index
``extent - 1 - index >= 0``). A lower bound of ``M`` is derived symbolically as a :class:`Form`, a
linear function of the run-time sizes with rational coefficients:

* a variable is replaced by the bound of its range that minimizes ``M`` (its start, or its stop
  minus one; a grid variable ranges over ``0 .. extent``, ``self`` over the role's instances) —
  extremal reasoning, exact for affine indices over a box of ranges;
* an atom is replaced by a bound of its value derived from bounds of its arguments:
  ``floor(x/k) >= (lo(x) - (k-1))/k``, ``cdiv(x, k) <= (hi(x) + k-1)/k``, exactly ``lo/k`` or ``hi/k``
  when the divisibility clauses make the bound a multiple of ``k``, ``x % k`` in ``0 .. k-1`` (or ``x``
  itself when ``0 <= x < k`` is proved), ``min``/``max`` by whichever argument bound is proved smaller
  or larger (else the smaller of their constant extremes);
* relations between variables are used through *guards*, facts ``G >= 0`` that hold where the
  operation runs: the enclosing ``if`` conditions (negated in ``else``), each loop's
  ``start <= v <= stop - 1``, each grid variable's ``g <= extent - 1``. ``M - λ·G`` (``λ > 0``
  chosen to cancel a variable, up to two guards) is bounded instead of ``M``;
* atoms are also *relaxed* in place, keeping their correlation with the rest of ``M``: a ``min``
  subtracted from ``M`` (or a ``max`` added) is replaced by either argument, ``x % k`` subtracted by
  ``x`` where ``x >= 0`` is proved, ``floor`` and ``cdiv`` by ``x/k`` shifted by ``k-1`` in the safe
  direction (unshifted where the divisibility clauses make ``x`` a multiple of ``k``).

A bound form is then minimized over the domain (each size at its least admissible value, or at its
greatest where its coefficient is negative; an unbounded size with a negative coefficient defeats the
proof). ``M`` is an integer, so a minimum above ``-1`` proves ``M >= 0`` for every admissible size
and every variable value: the verdict is :attr:`Status.PROVED`.

What is sampled
---------------
When no proof is found, a *witness search* runs the operation's enclosing binders concretely (grid,
``self``, loops, ``let``, ``if``) for a set of sizes: for each relevant size its 16 least admissible
values (all of them when a bounded range has fewer), values just below, at and above one and two
multiples of every constant written in the
kernel, a fixed list of small and large values (up to 65521 and 65536), all snapped to the
divisibility clauses and clipped to the ranges; scalar parameters take -1, 0, 1, 2 and 65536. All
combinations are tried when there are at most 4096, else each size is varied over its values while
the others take a small, a middle and a large one. Where the domain relates sizes (``KP >= K``,
``N % K == 0``), each combination is completed to one that satisfies every clause (a size moved to
the nearest value its relations admit) or dropped, so a witness never quotes inadmissible sizes. Loop and grid ranges longer than 64 are sampled at
their ends, their middle and around multiples of the kernel's constants from either end. A size
assignment for which a symbolic lower bound already holds is skipped, and the search stops after
60000 concrete evaluations. The first failing evaluation is a :class:`Witness` naming the sizes and
variable values the failing index depends on (:attr:`Status.VIOLATED`); when none is found the
verdict is :attr:`Status.SAMPLED`: in bounds on every sample, not proved.

Divisibility
------------
:meth:`KernelDomain.multiple_of` decides whether an expression (a row pitch, a start column) times an
element size is a multiple of an access width: *proved* when the constant and every coefficient
(a size's times its modulus) are multiples, else decided by the same witness search.

Expressions are evaluated as the interpreter does: ``/`` is floor division, ``%`` the non-negative
remainder. A domain with no admissible size (``N >= 8, N <= 4``) makes every obligation hold.

How it is computed (none of this changes a verdict)
---------------------------------------------------
* The symbolic view of a chain of binders (lets as linear forms, variable bounds, guards, the bounder)
  is built once per chain prefix (:class:`~cake_core.verify.scopes.ScopeViews`); proofs are memoized
  by obligation under each chain.
* Verdicts are kept across the specializations of a kernel that cannot tell them apart (the same
  integer constants, run-time sizes, role instances and buffer, barrier and tile shapes:
  :meth:`KernelDomain.fingerprint`) in the analyses of the checked module
  (:mod:`cake_core.verify.analyses`), as are the binders of each operation, the kernel's literals
  and the sample values of each size range.
* Size assignments are filtered with the proof attempts' lower bounds as integers, over tuples of
  sample values: most of the assignments a search enumerates are covered by a bound and skipped.
* An access with no obligation (nothing indexed) is proved without building its scope.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from cake_core.ir import nodes as n
from cake_core.ir.exprs import Fn, compile_expr
from cake_core.ir.primitive import Effect, Kind
from cake_core.verify.analyses import Analyses, for_model
from cake_core.verify.bounds import lin_multiple
from cake_core.verify.facts import facts
from cake_core.verify.linear import Lin, Linearizer
from cake_core.verify.proof import prove
from cake_core.verify.scopes import Binder, ScopeViews, binders
from cake_core.verify.shapes import ShapeDomain
from cake_core.verify.verdicts import MASKED, PROVED, AccessVerdict, Obligation, Verdict
from cake_core.verify.witness import WitnessSearch

if TYPE_CHECKING:
    from cake_core.ir.model import KernelModel, TypedOpImpl
    from cake_core.verify.scopes import Scope

__all__ = ["KernelDomain"]


class KernelDomain:
    """Proofs and witness searches about run-time sizes for one :class:`KernelModel`."""

    def __init__(self, model: KernelModel) -> None:
        self.model = model
        # what holds for every specialization of the kernel is kept in the checked module's analyses
        # (a private table where the model's module has none: then nothing outlives this object)
        table = for_model(model)
        self._analyses = table if table is not None else Analyses(())
        self._kernel = model.kernel
        self.shape = ShapeDomain.of(model)
        instances = tuple(r.instances for r in model.roles)
        self.scopes: dict[int, tuple[Binder, ...]] = self._analyses.get(
            "domain.binders", (id(self._kernel), instances), lambda: (model.kernel, binders(model))
        )[1]
        self.views = ScopeViews(self.shape, Linearizer(model.env, frozenset(self.shape.sizes), self.shape.scalars))
        self.witnesses = WitnessSearch(model, self.shape, self._analyses)
        self._fingerprint: tuple | None = None
        self._fingerprint_id: int | None = None
        self._nums: dict[int, n.Num] = {}

    def _memo_key(self, *parts: object) -> tuple | None:
        """A key for keeping a verdict across the kernel's specializations; None where the kernel has
        only this one (nothing to share, so nothing is fingerprinted)."""
        kernel = self._kernel
        if self._analyses.get("domain.specializations", id(kernel), lambda: (kernel, _specializations(kernel)))[1] == 1:
            return None
        if self._fingerprint_id is None:
            # the fingerprint, a large tuple, stands for itself by a small number in the keys (a tuple
            # hashes all its items every time)
            ids = self._analyses.get("domain.fingerprints", id(kernel), lambda: (kernel, {}))[1]
            self._fingerprint_id = ids.setdefault(self.fingerprint(), len(ids))
        return (*parts, self._fingerprint_id)

    def fingerprint(self) -> tuple:
        """Everything of this specialization the analysis depends on: two models of one kernel with
        the same fingerprint get the same verdicts (so they are kept across them)."""
        if self._fingerprint is None:
            m, kernel = self.model, self._kernel
            used = self._analyses.get("domain.names", id(kernel), lambda: (kernel, _kernel_names(kernel)))[1]
            env = tuple(sorted(
                (k, v) for k, v in m.env.items() if not isinstance(v, str) or k in used  # type: ignore[operator]
            ))  # fmt: skip
            self._fingerprint = (
                env, m.runtime_sizes, tuple(r.instances for r in m.roles),
                tuple((name, i.shape, i.stages) for name, i in m.smem.items()),
                tuple((name, i.stages) for name, i in m.barriers.items()),
                tuple((name, i.shape) for name, i in m.regs.items()),
            )  # fmt: skip
        return self._fingerprint

    def _kept(self, kind: str, op: n.Op | None, e: n.Expr, parts: tuple, make: Callable[[], Verdict]) -> Verdict:
        """``make()``, kept across the specializations that share this one's fingerprint."""
        key = self._memo_key(kind, id(op), id(e), *parts)
        if key is None:
            return make()
        # the entry holds the nodes whose ids key it
        return self._analyses.get("domain.verdict", (id(self._kernel), key), lambda: (op, e, make()))[2]

    # -- scopes --------------------------------------------------------------------------------------

    def scope(self, typed: TypedOpImpl) -> tuple[Binder, ...]:
        """The binders that enclose ``typed``, outermost first."""
        return self.scopes.get(id(typed.op), ())

    # -- deciding ------------------------------------------------------------------------------------

    def decide(self, typed: TypedOpImpl, obligations: Sequence[Obligation]) -> Verdict:
        """Prove every obligation, or search for a witness that breaks one."""
        chain = self.scope(typed)
        return self._decide(chain, self.views.view(chain), obligations)

    def _decide(self, chain: tuple[Binder, ...], state: Scope, obligations: Sequence[Obligation]) -> Verdict:
        """:meth:`decide` under ``chain``, whose scope is ``state``."""
        if not obligations or self.shape.empty():
            return PROVED
        bounder = self.views.bounder(state)
        open_ = []
        for ob in obligations:
            if ob.m is None:
                open_.append((ob, []))
                continue
            proof = state.proofs.get(ob.m.key)
            if proof is None:
                proof = state.proofs[ob.m.key] = prove(ob.m, bounder, state.guards)
            ok, forms = proof
            if not ok:
                open_.append((ob, forms))
        if not open_:
            return PROVED
        return self.witnesses.search(chain, open_)

    # -- obligations of accesses ---------------------------------------------------------------------

    def access_obligations(self, typed: TypedOpImpl, effect: Effect) -> list[Obligation]:
        """Every index of one operand access must lie inside what it indexes."""
        return self._access_obligations(self.scope(typed), effect)

    def _access_obligations(self, chain: tuple[Binder, ...], effect: Effect) -> list[Obligation]:
        o = effect.operand
        out: list[Obligation] = []
        extents: list[n.Expr]
        stages: int | None = None
        if o.kind is Kind.GLOBAL and isinstance(o.decl, n.Param):
            extents = list(o.decl.shape)
        elif o.kind is Kind.SHARED and o.name in self.model.smem:
            info = self.model.smem[o.name]
            extents = [self._num(v) for v in info.shape]
            stages = info.stages
        elif o.kind is Kind.REGISTERS and o.name in self.model.regs:
            extents = [self._num(v) for v in self.model.regs[o.name].shape]
        elif o.kind is Kind.BARRIER and o.name in self.model.barriers:
            extents, stages = [], self.model.barriers[o.name].stages
        else:
            return out
        if (o.stage is None or stages is None) and not o.index:
            return out  # nothing indexed: no obligation
        state = self.views.view(chain)
        if o.stage is not None and stages is not None:
            out += self._index(state, o.stage, self._num(stages), f"`{o.name}` has {stages} stages", stage=True)
        for d, item in enumerate(o.index):
            if d >= len(extents):
                break
            where = f"in dimension {d + 1}"
            if isinstance(item, n.At):
                out += self._index(state, item.expr, extents[d], where)
            elif isinstance(item, n.Span):
                out += self._span(state, item.start, item.size, extents[d], where)
        return out

    def _num(self, v: int) -> n.Num:
        """A literal for an extent the model knows, one node per value (so that the linear forms
        memoized by node are shared by every access to it)."""
        node = self._nums.get(v)
        if node is None:
            node = self._nums[v] = n.Num(v)
        return node

    def _index(self, state: Scope, e: n.Expr, ext: n.Expr, where: str, stage: bool = False) -> list[Obligation]:
        x, top_lin = self.views.lin(state, e), self.views.lin(state, ext)

        def low_of(v: object) -> str | None:
            if v < 0:  # type: ignore[operator]
                if stage:
                    return f"stage `{_text(e)}` is {v}, below 0"
                return f"{where}, index `{_text(e)}` is {v}, below 0"
            return None

        def high_of(v: object, top: object) -> str | None:
            if v >= top:  # type: ignore[operator]
                if stage:
                    return f"stage `{_text(e)}` is {v}, but {where}"
                return f"{where}, index `{_text(e)}` is {v}, past the extent {_extent(ext, top)}"
            return None

        high = None if x is None or top_lin is None else (top_lin - x).plus(-1)
        return [_obligation(x, (e,), low_of), _obligation(high, (e, ext), high_of)]

    def _span(self, state: Scope, start: n.Expr, size: n.Expr, ext: n.Expr, where: str) -> list[Obligation]:
        views = self.views
        s, z, top_lin = views.lin(state, start), views.lin(state, size), views.lin(state, ext)

        def low_of(v: object) -> str | None:
            return f"{where}, the slice starts at {v}, below 0" if v < 0 else None  # type: ignore[operator]

        def high_of(a: object, k: object, top: object) -> str | None:
            if k > 0 and a + k > top:  # type: ignore[operator]
                span = f"is at {a}" if k == 1 else f"covers {a}..{a + k - 1}"  # type: ignore[operator]
                return f"{where}, the slice {span}, past the extent {_extent(ext, top)}"
            return None

        high = None if s is None or z is None or top_lin is None else top_lin - s - z
        return [_obligation(s, (start,), low_of), _obligation(high, (start, size, ext), high_of)]

    # -- accesses ------------------------------------------------------------------------------------

    def access(self, typed: TypedOpImpl, effect: Effect) -> Verdict:
        """Whether one operand access stays in bounds (masked accesses are not examined)."""
        if effect.masked:
            return MASKED
        o = effect.operand
        return self._kept("access", typed.op, o.expr, (o.slot.name, o.kind), lambda: self._access(typed, effect))

    def _access(self, typed: TypedOpImpl, effect: Effect) -> Verdict:
        """``decide(typed, access_obligations(typed, effect))``."""
        chain = self.scope(typed)
        obligations = self._access_obligations(chain, effect)
        if not obligations:  # what decide says of no obligation, without looking at the scope
            return PROVED
        return self._decide(chain, self.views.view(chain), obligations)

    def accesses(self) -> list[AccessVerdict]:
        """Every tile and barrier access of every operation, with its verdict."""
        out = []
        for of in facts(self.model).ops:  # the effects every rule reads, computed once per model
            for eff in of.effects:
                if eff.operand.kind is Kind.VALUE or eff.operand.name is None:
                    continue
                out.append(AccessVerdict(of.typed, eff, self.access(of.typed, eff)))
        return out

    # -- divisibility --------------------------------------------------------------------------------

    def multiple_of(self, typed: TypedOpImpl | None, e: n.Expr, scale: int, k: int, what: str) -> Verdict:
        """Whether ``e * scale`` is a multiple of ``k`` wherever the operation runs, for every size.

        ``what`` names the quantity in a witness: its ``what`` reads ``f"{what} {e * scale}"``.

        Proved when every term's coefficient (times the size's modulus, for a size) and the constant,
        scaled, are multiples of ``k`` (a variable steps through consecutive integers, so that is also
        necessary for most); otherwise decided by the witness search. ``typed=None`` looks at sizes only.
        """
        op = typed.op if typed is not None else None
        return self._kept("multiple", op, e, (scale, k, what), lambda: self._multiple_of(typed, e, scale, k, what))

    def _multiple_of(self, typed: TypedOpImpl | None, e: n.Expr, scale: int, k: int, what: str) -> Verdict:
        chain = self.scope(typed) if typed is not None else ()
        x = self.views.lin(self.views.view(chain), e)
        if x is not None and lin_multiple(x.scale(scale), k, self.shape):
            return PROVED

        def of(v: object) -> str | None:
            if isinstance(v, int) and (v * scale) % k:
                return f"{what} {v * scale}"
            return None

        return self.witnesses.search(chain, [(_obligation(None, (e,), of), [])])


def _obligation(m: Lin | None, exprs: tuple[n.Expr, ...], of: Callable[..., str | None]) -> Obligation:
    """An obligation whose check evaluates ``exprs`` in order and gives their values to ``of`` (the
    expressions compiled on the first check: most obligations are proved and never checked)."""
    fns: list[Fn] = []

    def check(env: Mapping[str, object]) -> str | None:
        if not fns:
            fns.extend(compile_expr(x) for x in exprs)
        return of(*[f(env) for f in fns])

    return Obligation(m, exprs, check)


def _specializations(k: n.Kernel) -> int:
    """How many specializations the kernel's domain has."""
    from cake_core.ir.sema import specs

    return len(specs(k.domain))


def _kernel_names(k: n.Kernel) -> frozenset[str]:
    """Every name an expression of the kernel mentions (not the parameters' element types)."""
    exprs: list[n.Expr] = [e for p in k.params for e in p.shape] + list(k.grid.extents) + [c.value for c in k.consts]
    exprs += [k.cta.warps] + ([k.cta.occupancy] if k.cta.occupancy is not None else []) + list(k.cta.cluster)
    for s in k.smem:
        exprs += list(s.shape) + [x for x in (s.stages, s.pad, s.align) if x is not None]
    for b in k.barriers:
        exprs += [b.count] + ([b.stages] if b.stages is not None else [])
    for d in k.domain:
        exprs += list(d.values)
    for role in k.roles:
        exprs += [x for x in (role.warp_start, role.warp_stop, role.per, role.regs) if x is not None]
        for s in n.walk_stmts(role.body):
            if isinstance(s, n.Op):
                exprs += list(s.operands) + [a.value for a in s.attrs]
            elif isinstance(s, n.For):
                exprs += [s.start, s.stop] + ([s.step] if s.step is not None else [])
            elif isinstance(s, n.Let):
                exprs.append(s.value)
            elif isinstance(s, n.If):
                exprs.append(s.cond)
            elif isinstance(s, n.RegDecl):
                exprs += list(s.shape) + (list(s.layout.args) if s.layout is not None else [])
    names: set[str] = set()
    for e in exprs:
        for x in n.walk_expr(e):
            if isinstance(x, n.Name):
                names.add(x.id)
    return frozenset(names)


def _extent(ext: n.Expr, value: object) -> str:
    return str(value) if isinstance(ext, n.Num) else f"`{_text(ext)}` = {value}"


def _text(e: n.Expr) -> str:
    """Source-like text of an expression, for messages."""
    from cake_core.ir.printer import expr as print_expr

    try:
        return print_expr(e)
    except Exception:  # the printer does not know an expression: fall back to a plain form
        return type(e).__name__
