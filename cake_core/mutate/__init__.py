"""Mutation testing of the verifier and the interpreter: plausible schedule bugs, made on purpose.

:mod:`cake_core.mutate.operators` makes mutants of a module (each records its operator class, where
it edits and what, in one line); :mod:`cake_core.mutate.pipeline` runs them through the type checker,
the verifier and the interpreter and says, for each, what caught it — or why nothing did.
"""

from cake_core.mutate.operators import EXTRA_OPERATORS, OPERATORS, Mutant, Operator, mutants, operator

__all__ = ["EXTRA_OPERATORS", "OPERATORS", "Mutant", "Operator", "mutants", "operator"]
