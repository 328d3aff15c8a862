"""The tactic contract (*provisional*): one schedule transformation of the search space.

A tactic is a *local rewrite* of a Cake module that keeps the kernel's meaning. It names its precondition
(``precondition``: one line a person can check), lists where in a module it applies and with which choices
(:meth:`Tactic.applications`: every :class:`Application` whose precondition holds), and rewrites a module for
one of them (:meth:`Tactic.apply`). Splitting the two lets an agent enumerate, rank and remember what it tried
(a refused tactic and site are not retried) and replay a chain of applications from its text. A tactic
returns a new module; it never emits a stored kernel or a template.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    from cake_core.ir.nodes import Module
    from cake_core.target import Target


@attrs.frozen
class Application:
    """One way to apply a tactic to a module: the tactic, where (a kernel, a role, a buffer: the ``site``, as
    the tactic names it), and the choice made there (``params``). Its ``key`` identifies it across modules
    that share the site, so that an agent can remember what was refused."""

    tactic: str
    site: str
    params: Mapping[str, int | str] = attrs.field(factory=dict, converter=lambda p: dict(sorted(dict(p).items())))

    @property
    def key(self) -> str:
        args = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.tactic}@{self.site}({args})"


@runtime_checkable
class Tactic(Protocol):
    name: str
    #: one line: when the tactic applies (what :meth:`applications` checks)
    precondition: str

    def applications(self, module: Module, target: Target) -> Sequence[Application]:
        """Every application of the tactic to ``module`` for ``target`` whose precondition holds, in a stable
        order (an agent draws from them with its seeded ``rng``)."""
        ...

    def apply(self, module: Module, target: Target, application: Application) -> Module:
        """``module`` rewritten by one of :meth:`applications`'s answers (a new module; ``module`` unchanged)."""
        ...
