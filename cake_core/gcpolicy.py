"""The garbage collector's setting for Cake's processes.

Parsing and verifying allocate many small, short-lived objects (tokens, nodes, linear forms) and few
cycles. With CPython's default thresholds (700, 10, 10) a batch of verifications triggers a young
collection every few hundred allocations and, every hundred of those, a full one that walks every
object alive — the registry, the loaded plugins, every kernel still held — so the cost of collecting
grows with what the process keeps. Raising the first threshold to 200,000 (what mypy does for the
same reason) makes collections rare without turning the collector off: cycles are still freed.

Measured on the verify-throughput benchmark (10,000 mutants, one core): see bench/results/README.md.
"""

from __future__ import annotations

import gc

#: (young, middle, old) thresholds; see :func:`gc.set_threshold`
THRESHOLDS = (200_000, 30, 30)


def configure() -> None:
    """Apply :data:`THRESHOLDS` to this process (the ``cake`` command does at start)."""
    gc.set_threshold(*THRESHOLDS)
