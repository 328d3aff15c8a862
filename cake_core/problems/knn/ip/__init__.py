"""The problem ``knn-ip``: knn's class with the inner product as the score, in a package of its own so that
its committed schedules (``ip/schedules/*.cake``, what ``cake run knn-ip`` seeds from) are not knn's."""

from __future__ import annotations

import attrs

from cake_core.problems.knn.problem import Knn

__all__ = ["KNN_IP", "KnnIp"]


@attrs.frozen
class KnnIp(Knn):
    """:class:`~cake_core.problems.knn.problem.Knn` with ``metric="ip"``: the K largest ``q . x``."""

    metric: str = attrs.field(default="ip", validator=attrs.validators.in_(("ip",)))


#: the instance the knn plugin registers
KNN_IP = KnnIp()
