"""What a mutation operator is and what it makes: the :class:`Operator` base and the :class:`Mutant`
record, shared by the operator modules."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

import attrs

from cake_core.ir import nodes as n
from cake_core.ir.primitive import Primitive
from cake_core.location import Loc


@attrs.frozen
class Mutant:
    """One edit of a module: which operator made it, where, and what it changed, in one line."""

    operator: str
    kernel: str
    loc: Loc
    description: str
    module: n.Module = attrs.field(repr=False)
    #: the name the edit is about: the ring or barrier declared, or the operation's primitive
    subject: str = ""
    #: which variant of the operator: ``+1``, ``-1``, ``+1 wrapped``, ``+16``, ``drop``, ``swap``...
    variant: str = ""

    @property
    def where(self) -> str:
        """``kernel `assign`, line 57``."""
        return f"kernel `{self.kernel}`, line {self.loc.line}"


class Operator:
    """Base of mutation operators: a class id, a one-line summary, and :meth:`mutants`."""

    name: ClassVar[str]
    summary: ClassVar[str]

    def mutants(self, module: n.Module, primitives: Mapping[str, Primitive]) -> Iterator[Mutant]:
        """Every mutant this operator makes of ``module``."""
        for kernel in module.kernels:
            yield from self.kernel_mutants(module, kernel, primitives)

    def kernel_mutants(
        self, module: n.Module, kernel: n.Kernel, primitives: Mapping[str, Primitive]
    ) -> Iterator[Mutant]:
        raise NotImplementedError

    def mutant(
        self, kernel: n.Kernel, loc: Loc, description: str, module: n.Module, subject: str = "", variant: str = ""
    ) -> Mutant:
        return Mutant(self.name, kernel.name, loc, description, module, subject, variant)


def plus(e: n.Expr, k: int) -> n.Expr:
    """``e + k`` (folded when ``e`` is an integer literal)."""
    if isinstance(e, n.Num) and isinstance(e.value, int):
        return n.Num(e.value + k, loc=e.loc)
    return n.Bin("+" if k >= 0 else "-", e, n.Num(abs(k), loc=e.loc), loc=e.loc)
