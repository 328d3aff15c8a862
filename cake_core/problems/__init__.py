"""The problem contract and the built-in problems (``kmeans_assign``)."""

from cake_core.problems.problem import (
    METHOD_CUDA,
    METHOD_NUMPY,
    Cell,
    OracleReport,
    Problem,
    SizeDecl,
    TensorDecl,
    Violation,
)

__all__ = [
    "METHOD_CUDA",
    "METHOD_NUMPY",
    "Cell",
    "OracleReport",
    "Problem",
    "SizeDecl",
    "TensorDecl",
    "Violation",
]
