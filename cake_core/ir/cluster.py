"""Thread-block clusters as the IR sees them: the cluster size of a kernel and the rank name `crank`.

A kernel's ``cta ... cluster (C)`` groups ``C`` consecutive CTAs along the grid's first variable into
one cluster (dimensions after the first must be 1). Every role body may name ``crank``, the CTA's rank
in its cluster (``first grid index % C``; 0 without a cluster). The primitives that reach across the
cluster live in :mod:`cake_core.primitives.cluster`; the interpreter runs a cluster's CTAs together
(:mod:`cake_core.semantics.cluster`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cake_core.ir import nodes as n
from cake_core.ir.exprs import try_int

#: the name every role body may read: the CTA's rank in its cluster
CRANK = "crank"


def cluster_expr(k: n.Kernel) -> n.Expr:
    """The kernel's cluster size as written (its first dimension), ``1`` without a cluster."""
    return k.cta.cluster[0] if k.cta.cluster else n.Num(1)


def cluster_size(k: n.Kernel, env: Mapping[str, Any]) -> int:
    """The kernel's cluster size under the constants ``env`` (1 without a cluster or when unknown)."""
    v = try_int(cluster_expr(k), env)
    return v if v is not None and v > 0 else 1


def extra_dims(k: n.Kernel, env: Mapping[str, Any]) -> bool:
    """Whether the cluster shape has a dimension after the first of more than one CTA (not supported;
    sizes that are no size at all are the verifier's cluster-size rules' to name)."""
    return any((v := try_int(e, env)) is not None and v > 1 for e in k.cta.cluster[1:])


def crank(k: n.Kernel, env: Mapping[str, Any], first: int) -> int:
    """The rank in its cluster of the CTA whose first grid index is ``first``."""
    return first % cluster_size(k, env)
