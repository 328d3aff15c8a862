"""The analysis cache: what the verifier has computed about one checked module, under one plugin set.

Contract
--------
* A table of analyses (:class:`Analyses`) belongs to one
  :class:`~cake_core.ir.model.CheckedModule` and one plugin set (:func:`plugin_set`: the distributions
  and versions of a registry's plugins). :func:`analyses` gives the table of a (checked module, plugin
  set) pair; a different plugin set gets a different table, so an analysis made with one set of
  plugins (their primitives' effects, their rules) is never reused with another.
* The checked module is held weakly: its tables live exactly as long as it does, and nothing is kept
  across type checks. A table must therefore hold nothing that refers to the checked module itself
  (its models and nodes are fine: the module holds them anyway, and they do not refer back).
* An analysis is looked up by its name (prefixed by the module that owns it: ``"facts"``,
  ``"domain.verdict"``) and a key: :meth:`Analyses.get` computes it with ``make`` on first use and
  returns what it stored ever after. ``make`` must be a function of the checked module, the key and
  the plugins' code alone: the cache decides when an analysis is computed, never what it is. Where
  ``make`` raises, nothing is stored.
* A key must be hashable and cheap to hash: objects are named by ``id``, and an entry keyed by the
  ``id`` of an object keeps that object alive in its value, so that the ``id`` is not reused while the
  entry exists.
* The models of a checked module reach its table through :func:`for_model` once :func:`attach` has
  named the plugin set they are analysed under (a :class:`~cake_core.verify.rule.RuleContext` attaches
  its checked module when it is made). A model whose checked module was never attached has no table:
  its analyses are computed where they are asked for and kept no longer than what asked for them
  (facts on every call; a :class:`~cake_core.verify.domain.KernelDomain` in a table of its own).
* A scratch memo inside one computation (the bounds a :class:`~cake_core.verify.bounds.Bounder`
  memoizes during the proof searches of one kernel model) belongs to that computation and dies with
  it; it is not a cache layer and is not kept here.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, TypeVar

import attrs

if TYPE_CHECKING:
    from cake_core.ir.model import CheckedModule, KernelModel

__all__ = ["Analyses", "PluginSet", "analyses", "attach", "for_model", "plugin_set"]

T = TypeVar("T")

#: the distributions of a registry's plugins with their versions, sorted: what an analysis may depend
#: on beyond the checked module
PluginSet = tuple[tuple[str, str], ...]

_MISSING = object()


def plugin_set(registry: object) -> PluginSet:
    """The plugin set of a :class:`~cake_core.plugins.Registry`: every plugin's distribution and version."""
    return tuple(sorted({(p.distribution, p.version) for p in registry.plugins.values()}))  # type: ignore[attr-defined]


@attrs.define(eq=False)
class Analyses:
    """The analyses of one checked module under one plugin set, by analysis name and key."""

    plugins: PluginSet
    _found: dict[tuple[str, Hashable], object] = attrs.field(factory=dict, init=False)

    def get(self, name: str, key: Hashable, make: Callable[[], T]) -> T:
        """The analysis ``name`` of ``key``: ``make()`` the first time, what it returned ever after."""
        found = self._found.get((name, key), _MISSING)
        if found is _MISSING:
            found = self._found[(name, key)] = make()
        return found  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self._found)


@attrs.define(eq=False)
class _Tables:
    """The tables of one checked module, and the one its models use (see :func:`attach`)."""

    by_plugins: dict[PluginSet, Analyses] = attrs.field(factory=dict)
    attached: Analyses | None = None


_TABLES: weakref.WeakKeyDictionary[CheckedModule, _Tables] = weakref.WeakKeyDictionary()
#: each model of an attached checked module -> its module's attached table (weakly: the table lives
#: as long as the module, and holds the model)
_ATTACHED: weakref.WeakKeyDictionary[KernelModel, weakref.ref[Analyses]] = weakref.WeakKeyDictionary()


def analyses(checked: CheckedModule, plugins: PluginSet) -> Analyses:
    """The table of ``checked`` under ``plugins``, made empty on first use."""
    tables = _TABLES.get(checked)
    if tables is None:
        tables = _TABLES[checked] = _Tables()
    table = tables.by_plugins.get(plugins)
    if table is None:
        table = tables.by_plugins[plugins] = Analyses(plugins)
    return table


def attach(checked: CheckedModule, plugins: PluginSet) -> Analyses:
    """The table of ``checked`` under ``plugins``, made the one :func:`for_model` gives for its models."""
    table = analyses(checked, plugins)
    tables = _TABLES[checked]
    if tables.attached is not table:
        tables.attached = table
        ref = weakref.ref(table)
        for model in checked.models.values():
            _ATTACHED[model] = ref
    return table


def for_model(model: KernelModel) -> Analyses | None:
    """The attached table of the checked module ``model`` belongs to; None where there is none."""
    ref = _ATTACHED.get(model)
    return None if ref is None else ref()
