"""The verifier: runs registered rules over a kernel. No rule lives here.

* :mod:`cake_core.verify.rule` — the :class:`Rule` contract and the :class:`RuleContext` rules see;
* :mod:`cake_core.verify.runner` — :func:`verify`: every rule over every specialization of a checked
  module, findings merged across specializations and sorted;
* :mod:`cake_core.verify.domain` — reasoning about run-time sizes (bounds and divisibility over the
  whole shape domain), for rules to use; built from :mod:`~cake_core.verify.shapes` (the admissible
  sizes), :mod:`~cake_core.verify.linear` (linear forms), :mod:`~cake_core.verify.bounds` and
  :mod:`~cake_core.verify.proof` (the proof search), :mod:`~cake_core.verify.scopes` (what encloses an
  operation), :mod:`~cake_core.verify.witness` (the witness search) and
  :mod:`~cake_core.verify.verdicts` (its records);
* :mod:`cake_core.verify.facts` — each kernel model's operations with their declared effects and
  features, indexed once and shared by every rule;
* :mod:`cake_core.verify.analyses` — the one analysis cache: what is computed about a checked module,
  kept per checked module and plugin set;
* :mod:`cake_core.verify.protocol` — the synchronization protocol of one CTA simulated at concrete
  sizes: each role instance's trace of barrier actions and shared accesses, and their replay with the
  mbarrier semantics (hazards, deadlocks), for the protocol rules;
* :mod:`cake_core.verify.expectations` — the inline-expectation test harness rule packs share.
"""

from cake_core.verify.rule import Rule, RuleContext
from cake_core.verify.runner import Report, verify, verify_source

__all__ = ["Report", "Rule", "RuleContext", "verify", "verify_source"]
