"""The proof search: whether ``m >= 0`` holds for every admissible size and every variable value.

:func:`prove` tries lower bounds (:class:`~cake_core.verify.bounds.Bounder`) of ``m`` and of forms
derived from it whose lower bounds are also lower bounds of ``m`` (:mod:`cake_core.verify.domain`
documents the reasoning):

* :func:`eliminations` — ``m - λ·G`` for guards ``G >= 0`` that cancel one of its variables or atoms;
* :func:`relaxations` — atoms replaced in place by weaker forms, keeping their correlation with the
  rest of ``m``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

from cake_core.verify.bounds import Bounder, lin_multiple
from cake_core.verify.linear import Atom, Form, Lin, Q, Size, int_const, quotient

__all__ = ["eliminations", "prove", "relaxations"]


def prove(m: Lin, bounder: Bounder, guards: Sequence[Lin]) -> tuple[bool, list[Form]]:
    """Whether ``m >= 0`` is proved; also every lower-bound form tried (for filtering samples)."""
    if bounder.acyclic:
        # The first form the search below tries is ``bounder.lower(m)`` (eliminations and
        # relaxations both yield ``m`` itself first); most obligations are proved by it. Trying it
        # before the relaxations look at ``m``'s atoms only reorders calls to the bounder, which
        # give the same forms in any order where no variable's bound refers back to itself
        # (:attr:`Bounder.acyclic`). Not proved: the search runs from its start, and tries this
        # form first again (from the bounder's memo).
        f = bounder.lower(m)
        if f is not None and bounder.proves_nonneg(f):
            return True, [f]
    forms: list[Form] = []
    for cand in eliminations(m, guards):
        for variant in relaxations(cand, bounder):
            f = bounder.lower(variant)
            if f is None:
                continue
            forms.append(f)
            if bounder.proves_nonneg(f):
                return True, forms
    return False, forms

def eliminations(m: Lin, guards: Sequence[Lin]) -> Iterator[Lin]:
    """``m``, then ``m - λ·G`` for guards that cancel one of its variables or atoms (two rounds)."""
    yield m
    seen = {m.key}
    frontier = [m]
    guard_coefs = [(g, dict(g.terms)) for g in guards]
    for _ in range(2):
        nxt: list[Lin] = []
        for x in frontier:
            for g, coefs in guard_coefs:
                lambdas: dict[Q, None] = {1: None}  # insertion-ordered, as a set of values
                for sym, a in x.terms:
                    if type(sym) is Size:
                        continue
                    b = coefs.get(sym, 0)
                    if b != 0:
                        lam = quotient(a, b)
                        if lam > 0:
                            lambdas[lam] = None
                for lam in _set_order(lambdas):
                    y = x - g.scale(lam)
                    if y.key not in seen and len(seen) < 256:
                        seen.add(y.key)
                        nxt.append(y)
                        yield y
        frontier = nxt


def _set_order(values: dict[Q, None]) -> list[Q]:
    """The iteration order of the set the original algorithm built (``{Fraction(1)}`` then each λ
    added, as a Fraction): candidates are tried, and deduplicated, in that order. Equal numbers hash
    alike whatever their type, so the set of the values themselves, inserted in the same order, is
    laid out, and iterates, the same way."""
    return list(set(values))


def _alternatives(x: Atom, c: Q, bounder: Bounder) -> list[Lin]:
    """What :func:`relaxations` may replace the term ``c·x`` by (``x`` an atom); empty for none."""
    if (x.op == "min" and c < 0) or (x.op == "max" and c > 0):
        return list(x.args)
    if x.op in ("floor", "cdiv", "mod"):
        arg, k_lin = x.args
        k = int_const(k_lin)
        if not k:
            return []
        exact = lin_multiple(arg, k, bounder.domain)
        if x.op == "mod" and c < 0 and bounder.proves_nonneg(bounder.lower(arg)):
            return [arg]
        if x.op == "floor":
            return [arg.div(k) if c < 0 or exact else arg.plus(-(k - 1)).div(k)]
        if x.op == "cdiv":
            return [arg.div(k) if c > 0 or exact else arg.plus(k - 1).div(k)]
    return []


def relaxations(m: Lin, bounder: Bounder) -> Iterator[Lin]:
    """``m`` and forms whose lower bounds are lower bounds of ``m``, keeping correlations an atom's
    independent bound would lose. For a term ``c·atom``:

    * ``c < 0``: ``min(a, b) <= a`` and ``<= b``; ``x % k <= x`` when ``x >= 0``; ``floor(x/k) <= x/k``;
      ``cdiv(x, k) <= (x + k-1)/k`` (``x/k`` when ``x`` is always a multiple of ``k``);
    * ``c > 0``: ``max(a, b) >= a`` and ``>= b``; ``cdiv(x, k) >= x/k``;
      ``floor(x/k) >= (x - (k-1))/k`` (``x/k`` when a multiple).
    """
    options: list[tuple[Atom, Q, list[Lin]]] = []
    known = bounder.alternatives
    for x, c in m.terms:
        if type(x) is not Atom:
            continue
        # the alternatives depend on the atom, the sign of its coefficient and bounds the bounder
        # memoizes (it answers a question the same way every time it is asked): computed once
        key = (x.key, c > 0)
        alts = known.get(key)  # type: ignore[assignment]
        if alts is None:
            alts = known[key] = _alternatives(x, c, bounder)
        if alts:
            options.append((x, c, alts))
    yield m
    if not options:
        return
    options = options[:6]
    chosen = {o[0] for o in options}
    rest = Lin.make(m.const, {x: c for x, c in m.terms if x not in chosen})
    for picks in itertools.product(*[[None, *alts] for _, _, alts in options]):
        if all(p is None for p in picks):
            continue
        out = rest
        for (atom, c, _), p in zip(options, picks, strict=True):
            out = out + (Lin.of(atom) if p is None else p).scale(c)
        yield out
