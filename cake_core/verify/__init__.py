"""The verifier: runs registered rules over a kernel. No rule lives here.

* :mod:`cake_core.verify.rule` — the :class:`Rule` contract and the :class:`RuleContext` rules see;
* :mod:`cake_core.verify.runner` — :func:`verify`: type check, every rule over every specialization,
  findings merged across specializations and sorted;
* :mod:`cake_core.verify.domain` — reasoning about run-time sizes (bounds and divisibility over the
  whole shape domain), for rules to use;
* :mod:`cake_core.verify.expectations` — the inline-expectation test harness rule packs share.
"""

from cake_core.verify.rule import Rule, RuleContext
from cake_core.verify.runner import Report, verify, verify_source

__all__ = ["Report", "Rule", "RuleContext", "verify", "verify_source"]
