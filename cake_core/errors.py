"""The two kinds of failure Cake distinguishes.

A :class:`CakeUserError` is bad input: an unknown target, a file that does not exist, a malformed
option. The command line prints its message on one line and exits with status 2. Anything else that
escapes is an internal error (our bug): it exits with status 3 and, with ``CAKE_DEBUG=1``, a traceback.
"""

from __future__ import annotations


class CakeError(Exception):
    """Base class of every error Cake raises on purpose."""


class CakeUserError(CakeError):
    """Bad input from the user: reported as one line, exit status 2."""

    exit_code = 2


class UnknownNameError(CakeUserError):
    """A name (target, problem, rule, ...) that no loaded plugin registered."""

    def __init__(self, category: str, name: str, known: list[str]) -> None:
        self.category, self.name, self.known = category, name, sorted(known)
        choices = ", ".join(self.known) if self.known else "none are registered"
        super().__init__(f"unknown {category} `{name}` (known: {choices})")


class NotLoweredError(CakeUserError):
    """A well-typed operation the lowering cannot emit for a target or operand placement yet: a gap in the
    vocabulary's lowering, not a mistake in the kernel (``cake run`` routes it to the IR vocabulary)."""


class PluginConflictError(CakeUserError):
    """Two plugins registered the same name in one category."""


class NoGpuError(CakeUserError):
    """The GPU layer was asked for but this machine has no usable NVIDIA driver or device."""


class CakeInternalError(CakeError):
    """A broken invariant inside Cake itself: a bug to report, never the user's fault."""

    exit_code = 3
