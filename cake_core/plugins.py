"""The plugin manager: built-in plugins first, then every entry point of the group ``cake``.

Environment:
    ``CAKE_PLUGINS``      comma-separated allow-list of distribution or entry-point names; when set,
                          only those entry points load (the core's built-in plugins always load).
    ``CAKE_TRACE_HOOKS``  when non-empty, every hook call, the plugin whose ``register`` it receives,
                          and its result are traced to stderr.

What the host refuses is a :class:`~cake_core.errors.CakeUserError` of one line naming the plugin and
its distribution: the same name registered twice in one category (:class:`PluginConflictError`), an
object that is not its category's interface or has no name, an object that uses a name no loaded
plugin declares (a target's feature, a primitive slot's memory tier), a hook name Cake does not
define, a hook function without ``@hookimpl``, an argument a spec does not have, a plugin that fails
to import or raises in a hook. ``docs/plugins.md`` is the contract for plugin authors.

The host imports no interface: each category names its interface's module and class
(:data:`CATEGORIES`), and :func:`interface_of` finds it among the loaded modules, so this module sits
below every package that defines an interface and consults the registry.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import pluggy

from cake_core import hookspecs
from cake_core.errors import CakeError, CakeUserError, PluginConflictError, UnknownNameError

ALLOW_ENV = "CAKE_PLUGINS"
TRACE_ENV = "CAKE_TRACE_HOOKS"
ENTRY_POINT_GROUP = "cake"

# Modules inside cake_core that register through the same hooks as any external plugin.
BUILTIN_PLUGINS: tuple[str, ...] = (
    "cake_core.primitives", "cake_core.problems.kmeans_assign", "cake_core.problems.kmeans_update",
    "cake_core.problems.knn", "cake_core.problems.kmeans_iter",
)

@attrs.frozen
class Category:
    """One kind of thing plugins register: its name, its hook, what one of it is called, the interface
    every registered object must satisfy, and the names in other categories an object uses."""

    name: str  # "rules": the key of :meth:`Registry.get`
    hook: str  # "cake_register_rules"
    word: str  # "rule", for messages
    interface: str  # "module:QualName" of the class every object registered here is an instance of
    uses: Callable[[Any], Iterable[tuple[str, str]]] = lambda obj: ()  # (category, name) it needs declared


def _target_uses(target: Any) -> Iterable[tuple[str, str]]:
    return [("features", f) for f in sorted(target.features)]


def _primitive_uses(prim: Any) -> Iterable[tuple[str, str]]:
    sig = prim.signature
    return [("tiers", k) for k in sorted({k for slot in sig.outs + sig.ins for k in slot.kinds})]


def _schedule_uses(schedule: Any) -> Iterable[tuple[str, str]]:
    return [("problems", schedule.problem)]


#: every category, in the order of the hooks in :mod:`cake_core.hookspecs`
CATEGORIES: tuple[Category, ...] = (
    Category("targets", "cake_register_targets", "target", "cake_core.target:Target", _target_uses),
    Category("features", "cake_register_features", "feature", "cake_core.target:TargetFeature"),
    Category("tiers", "cake_register_tiers", "memory tier", "cake_core.ir.primitive:Tier"),
    Category("layouts", "cake_register_layouts", "layout", "cake_core.ir.layouts:TileLayout"),
    Category(
        "primitives", "cake_register_primitives", "primitive", "cake_core.ir.primitive:Primitive", _primitive_uses
    ),
    Category("rules", "cake_register_rules", "rule", "cake_core.verify.rule:Rule"),
    Category("mutations", "cake_register_mutations", "mutation class", "cake_core.mutate.mutant:Operator"),
    Category("cost_models", "cake_register_cost_models", "cost model", "cake_core.cost.model:CostModel"),
    Category("tactics", "cake_register_tactics", "tactic", "cake_core.loop.tactic:Tactic"),
    Category("agents", "cake_register_agents", "agent", "cake_core.loop.agent:Agent"),
    Category("problems", "cake_register_problems", "problem", "cake_core.problems.problem:Problem"),
    Category("schedules", "cake_register_schedules", "schedule", "cake_core.problems.schedule:Schedule",
             _schedule_uses),
)  # fmt: skip
#: hook name -> its category
BY_HOOK: dict[str, Category] = {c.hook: c for c in CATEGORIES}
_BY_NAME: dict[str, Category] = {c.name: c for c in CATEGORIES}
#: the hooks that observe a run (``cake_run_started`` ...): called with records, not a ``register`` callback
OBSERVER_HOOKS: frozenset[str] = frozenset(
    n for n in dir(hookspecs) if n.startswith("cake_") and not n.startswith("cake_register_")
)


@attrs.frozen
class PluginInfo:
    """One registered plugin and the distribution that ships it."""

    name: str  # the plugin's name in the manager: an entry-point name or a built-in module name
    distribution: str
    version: str
    module: str
    builtin: bool


@attrs.frozen
class Registration:
    category: str
    name: str
    obj: Any
    plugin: PluginInfo


def interface_of(category: str) -> type | None:
    """The interface every object registered in ``category`` must be an instance of, if its module is
    loaded. The host never imports an interface: an object can only be an instance of a class whose
    module is loaded, so it looks the class up there, and sits below every package that defines one."""
    module, _, qualname = _BY_NAME[category].interface.partition(":")
    loaded = sys.modules.get(module)
    return None if loaded is None else getattr(loaded, qualname)


class Registry:
    """Everything the loaded plugins registered, by category and name."""

    def __init__(self, manager: pluggy.PluginManager, plugins: dict[str, PluginInfo]) -> None:
        self.manager = manager
        self.plugins = plugins
        self._items: dict[str, dict[str, Registration]] = {c.name: {} for c in CATEGORIES}

    def _add(self, category: str, obj: Any, plugin: PluginInfo) -> None:
        what = _BY_NAME[category].word
        iface = interface_of(category)
        if iface is None or not isinstance(obj, iface):
            raise CakeUserError(
                f"{_describe(plugin)} registered a {what} that is not a "
                f"{_BY_NAME[category].interface.replace(':', '.')}: {' '.join(repr(obj).split()):.80}"
            )
        name = getattr(obj, "name", None)
        if not isinstance(name, str) or not name:
            raise CakeUserError(f"{_describe(plugin)} registered a {what} without a name")
        prior = self._items[category].get(name)
        if prior is not None:
            a, b = prior.plugin, plugin
            raise PluginConflictError(
                f"{what} `{name}` is registered twice: by {a.distribution} {a.version} "
                f"(plugin `{a.name}`) and by {b.distribution} {b.version} (plugin `{b.name}`); "
                f"uninstall one, or leave one out with {ALLOW_ENV}"
            )
        self._items[category][name] = Registration(category, name, obj, plugin)

    def get(self, category: str, name: str) -> Any:
        try:
            return self._items[category][name].obj
        except KeyError:
            raise UnknownNameError(_BY_NAME[category].word, name, list(self._items[category])) from None

    def registration(self, category: str, name: str) -> Registration:
        self.get(category, name)
        return self._items[category][name]

    def names(self, category: str) -> list[str]:
        return sorted(self._items[category])

    def by_name(self, category: str) -> dict[str, Any]:
        """Everything registered in ``category`` by name, in the order it was registered (the core's
        built-in plugins first)."""
        return {name: r.obj for name, r in self._items[category].items()}

    def values(self, category: str) -> list[Any]:
        return [self._items[category][n].obj for n in self.names(category)]

    def registered_by(self, plugin_name: str) -> dict[str, list[str]]:
        """What one plugin registered, category -> sorted names (empty categories left out)."""
        out: dict[str, list[str]] = {}
        for category in CATEGORIES:
            names = sorted(n for n, r in self._items[category.name].items() if r.plugin.name == plugin_name)
            if names:
                out[category.name] = names
        return out

    def check_uses(self) -> None:
        """Refuse an object that uses a name no loaded plugin declares: a target's feature, a
        primitive slot's memory tier, a schedule's problem."""
        for category in CATEGORIES:
            for reg in self._items[category.name].values():
                for used_category, name in category.uses(reg.obj):
                    if name not in self._items[used_category]:
                        used = _BY_NAME[used_category]
                        raise CakeUserError(
                            f"{_describe(reg.plugin)} registered {category.word} `{reg.name}`, which uses "
                            f"the {used.word} `{name}` that no loaded plugin declares (through `{used.hook}`)"
                        )


def _allow_list() -> set[str] | None:
    raw = os.environ.get(ALLOW_ENV)
    if raw is None:
        return None
    return {p.strip() for p in raw.split(",") if p.strip()}


def _entry_points() -> Iterable[importlib.metadata.EntryPoint]:
    return sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


class _Register:
    """The ``register`` callback one plugin's hook receives: files what it registers under that plugin.

    Its ``repr`` names the category and the plugin, so ``CAKE_TRACE_HOOKS`` says whose hook is called.
    """

    __slots__ = ("_registry", "_category", "_plugin")

    def __init__(self, registry: Registry, category: str, plugin: PluginInfo) -> None:
        self._registry, self._category, self._plugin = registry, category, plugin

    def __call__(self, obj: object) -> None:
        self._registry._add(self._category, obj, self._plugin)

    def __repr__(self) -> str:
        p = self._plugin
        return f"<register {self._category} of plugin `{p.name}` ({p.distribution} {p.version})>"


def _describe(info: PluginInfo) -> str:
    return f"plugin `{info.name}` ({info.distribution} {info.version})"


def _check_hook_names(plugin: object, info: PluginInfo, pm: pluggy.PluginManager) -> None:
    """Reject hook implementations Cake would never call: an unknown ``cake_*`` hook name, or a
    ``cake_register_*`` function without ``@hookimpl`` (pluggy would skip it silently)."""
    hooks = set(BY_HOOK) | OBSERVER_HOOKS
    known = sorted(hooks)
    for attr in dir(plugin):
        if not attr.startswith("cake_"):
            continue
        fn = getattr(plugin, attr, None)
        if not inspect.isroutine(fn):
            continue
        marked = pm.parse_hookimpl_opts(plugin, attr) is not None
        if attr not in hooks and (marked or attr.startswith("cake_register_")):
            close = difflib.get_close_matches(attr, known, n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else f" (hooks: {', '.join(known)})"
            raise CakeUserError(f"{_describe(info)} implements `{attr}`, a hook Cake does not define{hint}")
        if attr in hooks and not marked:
            raise CakeUserError(
                f"{_describe(info)} defines `{attr}` without `@hookimpl` "
                f"(from cake_core.hookspecs), so Cake would never call it"
            )


def _make_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager("cake")
    pm.add_hookspecs(hookspecs)
    if os.environ.get(TRACE_ENV):
        pm.trace.root.setwriter(sys.stderr.write)
        pm.enable_tracing()
    return pm


def load(extra: Iterable[types.ModuleType | object] = ()) -> Registry:
    """Build a fresh registry: built-ins, then allowed entry points, then ``extra`` (for tests)."""
    from cake_core import __version__

    pm = _make_manager()
    plugins: dict[str, PluginInfo] = {}

    def add(plugin: object, info: PluginInfo) -> None:
        if info.name in plugins:
            prior = plugins[info.name]
            raise PluginConflictError(
                f"two plugins are named `{info.name}`: from {prior.distribution} {prior.version} "
                f"and from {info.distribution} {info.version}"
            )
        _check_hook_names(plugin, info, pm)
        try:
            pm.register(plugin, name=info.name)
        except pluggy.PluginValidationError as exc:  # e.g. an argument the hook spec does not have
            detail = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            raise CakeUserError(f"{_describe(info)} is not a valid Cake plugin: {detail}") from exc
        plugins[info.name] = info

    for modname in BUILTIN_PLUGINS:
        module = importlib.import_module(modname)
        add(module, PluginInfo(modname, "cake-core", __version__, modname, True))

    allow = _allow_list()
    eps = list(_entry_points())
    if allow is not None:
        # an allow-list naming something no installed plugin is called is a typo, not an empty wish
        known = {ep.name for ep in eps} | {ep.dist.name for ep in eps if ep.dist is not None}
        unknown = sorted(allow - known)
        if unknown:
            raise CakeUserError(
                f"{ALLOW_ENV} names {', '.join(f'`{u}`' for u in unknown)}, which no installed plugin is called "
                f"(installed: {', '.join(sorted(known)) or 'none'})"
            )
    for ep in eps:
        dist = ep.dist.name if ep.dist is not None else "unknown"
        version = ep.dist.version if ep.dist is not None else "unknown"
        if allow is not None and ep.name not in allow and dist not in allow:
            continue
        try:
            module = ep.load()
        except Exception as exc:  # a broken third-party package is the user's environment, not our bug
            raise CakeUserError(
                f"plugin `{ep.name}` ({dist} {version}) failed to load: {type(exc).__name__}: {exc}"
            ) from exc
        add(module, PluginInfo(ep.name, dist, version, ep.value, False))

    for i, plugin in enumerate(extra):
        name = getattr(plugin, "__name__", f"extra-{i}")
        add(plugin, PluginInfo(name, "(in-process)", "0", name, False))

    try:
        pm.check_pending()  # _check_hook_names catches these first, with a better message
    except pluggy.PluginValidationError as exc:
        raise CakeUserError(f"a plugin implements a hook Cake does not define: {exc}") from exc

    registry = Registry(pm, plugins)
    for category in CATEGORIES:
        for plugin_name, info in plugins.items():
            others = [p for n, p in pm.list_name_plugin() if n != plugin_name]
            caller = pm.subset_hook_caller(category.hook, remove_plugins=others)
            if not caller.get_hookimpls():
                continue
            try:
                caller(register=_Register(registry, category.name, info))
            except CakeError:
                raise
            except Exception as exc:  # a broken plugin is the user's environment, as a failed import is
                raise CakeUserError(
                    f"{_describe(info)} failed in `{category.hook}`: {type(exc).__name__}: {exc}"
                ) from exc
    registry.check_uses()
    return registry


def module_from_file(name: str, path: str | os.PathLike[str]) -> types.ModuleType:
    """The Python file at ``path`` imported as the module ``name``, once per process (a later call
    gives the module already in ``sys.modules``): an in-process plugin for :func:`load`'s ``extra``,
    such as a test suite's fixture primitives."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise CakeUserError(f"{path} is not a Python file Cake can import")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


_REGISTRY: Registry | None = None


def registry() -> Registry:
    """The process-wide registry, loaded on first use."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = load()
    return _REGISTRY


def reset() -> None:
    """Forget the process-wide registry (tests, or after changing the environment)."""
    global _REGISTRY
    _REGISTRY = None
