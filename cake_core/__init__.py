"""Cake: a compiler-agent co-design harness that evolves GPU kernels."""

from cake_core.errors import CakeError, CakeInternalError, CakeUserError

__version__ = "0.1.0"

__all__ = ["CakeError", "CakeInternalError", "CakeUserError", "__version__"]
