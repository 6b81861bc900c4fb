"""Plugin discovery, loading and the contributions plugins register.

:func:`load_plugins` is the one factory of plugin managers; there is no global
manager. It registers the built-in default plugins, then third-party plugins
from the ``toolflow`` entry-point group, then the project's local plugins named
in ``[tool.toolflow] plugins``. ``TOOLFLOW_LOAD_PLUGINS`` (an allow-list) and
``TOOLFLOW_DISABLE_PLUGINS`` (a block-list), comma-separated names of entry
points, distributions or modules, apply before anything is imported.

Registering a plugin calls its ``toolflow_register_*`` hooks once, at once:
each contribution is checked as it is registered, and a plugin whose hook
raises or registers something malformed fails as a whole, so that what the
registry and the linter see later never changes and never warns twice.

A plugin that fails to import or register, or that implements a hook that
does not exist, is reported by one :class:`PluginLoadWarning` naming it, its
distribution and the error, and everything else keeps working; with
``strict=True`` it raises :class:`PluginError` instead.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import inspect
import json
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import attrs
import pluggy

from toolflow import __version__, hookspecs
from toolflow._errors import ToolflowError, expect, expect_names
from toolflow._lint._rule import PluginFacts, Rule
from toolflow._schemas import did_you_mean, spec_schema

__all__ = [
    "Binding",
    "ImplementationKind",
    "PluginError",
    "PluginInfo",
    "PluginLoadWarning",
    "Plugins",
    "ToolPack",
    "load_plugins",
]

DISTRIBUTION = "toolflow-yaml"
"""toolflow's distribution name on the package index (``toolflow`` there is another project)."""
ENTRY_POINT_GROUP = "toolflow"
LOAD_ENV = "TOOLFLOW_LOAD_PLUGINS"
DISABLE_ENV = "TOOLFLOW_DISABLE_PLUGINS"
HOOK_NAMES = frozenset(name for name in hookspecs.__all__ if name.startswith("toolflow_"))
REGISTER_HOOKS = tuple(sorted(name for name in HOOK_NAMES if name.startswith("toolflow_register_")))
"""The register-callback hooks, called once per plugin when it is registered."""
DEFAULT_PLUGINS = (
    "toolflow.default_plugins.template",
    "toolflow.default_plugins.command",
    "toolflow.default_plugins.scripted",
    "toolflow.default_plugins.openai",
    "toolflow.default_plugins.anthropic",
    "toolflow.default_plugins.otel",
)

IMPLEMENTATIONS = "toolflow_register_implementations"
KINDS = "toolflow_register_kinds"
LINT_RULES = "toolflow_register_lint_rules"
TOOL_PACKS = "toolflow_register_tool_packs"
_PACK_NAME = re.compile(r"^[a-z][a-z0-9]*([_-][a-z0-9]+)*$")

_LAZY_TARGET = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_PLUGIN_RULE_CODE = re.compile(r"^[A-Z]+[0-9]+$")


class PluginError(ToolflowError):
    """A plugin is broken: it failed to load or register (strict mode), or a lazy implementation cannot be imported.

    Attributes:
        plugin: The name of the plugin at fault, when there is one.
    """

    exit_code = 2

    def __init__(self, message: str, *, plugin: str | None = None) -> None:
        super().__init__(message)
        self.plugin = plugin


class PluginLoadWarning(UserWarning):
    """A plugin could not be loaded; toolflow goes on without it."""


@attrs.frozen(kw_only=True)
class ToolPack:
    """Spec files a plugin ships under a name that spec files ``include``."""

    name: str
    files: tuple[str, ...]
    plugin: str = ""


@attrs.frozen(kw_only=True)
class PluginInfo:
    """What ``toolflow plugins`` reports about one plugin.

    Attributes:
        name: The plugin's name: its entry-point name, module name (builtin and project plugins) or given name.
        source: ``builtin``, ``entry-point``, ``project`` or ``manual``.
        status: ``loaded``, ``failed`` or ``disabled``.
        distribution: The distribution that ships it (``toolflow-yaml`` for the builtins).
        version: The distribution's version.
        module: The module (or entry-point value) it comes from.
        error: Why it failed.
        hooks: The hooks it implements, sorted.
        implementations: The implementation names it binds, in registration order.
        kinds: The implementation kinds it adds.
        lint_rules: The codes of the lint rules it adds.
        tool_packs: The names of the tool packs it ships.
    """

    name: str
    source: str
    status: str
    distribution: str | None = None
    version: str | None = None
    module: str | None = None
    error: str | None = None
    hooks: tuple[str, ...] = ()
    implementations: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    lint_rules: tuple[str, ...] = ()
    tool_packs: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The info as JSON-ready data (``toolflow plugins --json``)."""
        return {
            "name": self.name,
            "source": self.source,
            "status": self.status,
            "distribution": self.distribution,
            "version": self.version,
            "module": self.module,
            "hooks": list(self.hooks),
            "implementations": list(self.implementations),
            "kinds": list(self.kinds),
            "lint_rules": list(self.lint_rules),
            "error": self.error,
        }


@attrs.frozen(kw_only=True)
class Binding:
    """An implementation name bound by a plugin to a callable or a lazy ``"module:attr"`` string."""

    name: str
    target: Callable[..., Any] | str
    plugin: str

    @property
    def lazy(self) -> bool:
        """True when the target is a ``"module:attr"`` string, imported on first :meth:`resolve`."""
        return isinstance(self.target, str)

    def resolve(self) -> Callable[..., Any]:
        """Return the callable, importing a lazy target.

        Raises:
            PluginError: The lazy target cannot be imported or is not callable.
        """
        if not isinstance(self.target, str):
            return self.target
        module_name, _, attribute = self.target.partition(":")
        try:
            value: Any = importlib.import_module(module_name)
            for part in attribute.split("."):
                value = getattr(value, part)
        except Exception as exc:
            msg = f"implementation {self.name!r} of plugin {self.plugin!r}: cannot import {self.target!r}: {exc!r}"
            raise PluginError(msg, plugin=self.plugin) from exc
        if not callable(value):
            msg = f"implementation {self.name!r} of plugin {self.plugin!r}: {self.target!r} is not callable"
            raise PluginError(msg, plugin=self.plugin)
        return value  # type: ignore[no-any-return]


@attrs.frozen(kw_only=True)
class ImplementationKind:
    """A way to implement tools, selected by a spec key (``template``, ``command``, ``http``).

    Attributes:
        name: The spec key.
        schema: JSON Schema (draft-07) of the key's value, used by the linter and the loader.
        build: Given the tool's :class:`~toolflow.ToolSpec`, returns the callable that runs it.
        description: One line for listings.
        plugin: Filled in with the registering plugin's name.
    """

    name: str
    schema: Mapping[str, Any]
    build: Callable[[Any], Callable[..., Any]]
    description: str = ""
    plugin: str = ""


def _names(value: str | None) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset(_normal(n) for n in value.split(",") if n.strip())


def _normal(name: str) -> str:
    """Compare names the way package indexes do: case-insensitive, ``-``, ``_`` and ``.`` alike."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


@attrs.define
class Plugins:
    """A plugin manager and what its plugins registered. Build one with :func:`load_plugins`.

    Attributes:
        manager: The pluggy manager (call hooks through :attr:`hook`).
        strict: Raise :class:`PluginError` when a plugin fails instead of warning.
        infos: One entry per plugin seen, in load order: loaded, failed or disabled.
    """

    manager: pluggy.PluginManager
    strict: bool = False
    infos: list[PluginInfo] = attrs.field(factory=list)
    _contributions: dict[str, dict[str, list[Any]]] = attrs.field(factory=dict, alias="_contributions")

    def register(self, plugin: object, name: str, *, source: str = "manual", **info: Any) -> bool:
        """Register *plugin* (a module or object with hook implementations) under *name*.

        Calls its register hooks at once and keeps what they contribute.

        Returns:
            True when registered. A plugin that implements an unknown hook, whose
            hook raises, or that registers something malformed is not registered:
            it is reported like a plugin that fails to import.

        Raises:
            PluginError: In strict mode, the plugin failed.
        """
        try:
            hooks, contributions = self._admit(plugin, name)
        except PluginError as exc:
            self.fail(name, source, str(exc), **info)
            return False
        self._contributions[name] = contributions
        self.infos.append(
            PluginInfo(
                name=name,
                source=source,
                status="loaded",
                hooks=hooks,
                implementations=tuple(b.name for b in contributions.get(IMPLEMENTATIONS, ())),
                kinds=tuple(k.name for k in contributions.get(KINDS, ())),
                lint_rules=tuple(r.code for r in contributions.get(LINT_RULES, ())),
                tool_packs=tuple(p.name for p in contributions.get(TOOL_PACKS, ())),
                **info,
            )
        )
        return True

    def unregister(self, name: str) -> None:
        """Forget plugin *name*: its hooks, its contributions and its info (used to undo test registrations)."""
        if self.manager.has_plugin(name):
            self.manager.unregister(name=name)
        self._contributions.pop(name, None)
        self.infos[:] = [i for i in self.infos if i.name != name]

    def fail(self, name: str, source: str, error: BaseException | str, **info: Any) -> None:
        """Record that plugin *name* failed; warn, or raise :class:`PluginError` when strict."""
        text = error if isinstance(error, str) else _one_line(error)
        self.infos.append(PluginInfo(name=name, source=source, status="failed", error=text, **info))
        origin = ""
        if info.get("distribution"):
            origin = f" (distribution {' '.join(filter(None, (info['distribution'], info.get('version'))))})"
        message = f"plugin {name!r}{origin} failed to load: {text}"
        if self.strict:
            raise PluginError(message, plugin=name) from (error if isinstance(error, BaseException) else None)
        warnings.warn(PluginLoadWarning(f"{message} (disable it with {DISABLE_ENV}={name})"), stacklevel=3)

    @property
    def hook(self) -> Any:
        """The hook relay (``plugins.hook.toolflow_before_call(call=...)``)."""
        return self.manager.hook

    def _items(self, hook_name: str) -> Iterator[Any]:
        for contributions in self._contributions.values():
            yield from contributions.get(hook_name, ())

    def bindings(self) -> dict[str, list[Binding]]:
        """Every implementation name with the plugins that bind it (more than one is a conflict)."""
        found: dict[str, list[Binding]] = {}
        for binding in self._items(IMPLEMENTATIONS):
            found.setdefault(binding.name, []).append(binding)
        return found

    def kinds(self) -> dict[str, list[ImplementationKind]]:
        """Every implementation kind with the plugins that register it (more than one is a conflict)."""
        found: dict[str, list[ImplementationKind]] = {}
        for kind in self._items(KINDS):
            found.setdefault(kind.name, []).append(kind)
        return found

    def kind_schemas(self) -> dict[str, Mapping[str, Any]]:
        """Spec key to the schema of its value, for each kind: what the loader needs (``load_specs(kinds=...)``).

        A conflict (two plugins, one kind) is left to the registry, which reports it; the first schema is used.
        """
        return {name: found[0].schema for name, found in self.kinds().items() if found}

    def tool_packs(self) -> dict[str, list[ToolPack]]:
        """Every tool pack with the plugins that register it (more than one is a conflict)."""
        found: dict[str, list[ToolPack]] = {}
        for pack in self._items(TOOL_PACKS):
            found.setdefault(pack.name, []).append(pack)
        return found

    def loader_options(self) -> dict[str, Any]:
        """What ``toolflow.load_specs`` needs of the plugins: their kinds' schemas and their tool packs' files.

        A pack two plugins register is given as no files (``load_specs`` reports its inclusion).
        """
        packs = {name: found[0].files if len(found) == 1 else () for name, found in self.tool_packs().items()}
        return {"kinds": self.kind_schemas(), "packs": packs}

    def spec_schema(self) -> dict[str, Any]:
        """The spec-file schema with each plugin's kind as a tool key, marked with the plugin it comes from.

        What ``toolflow spec-schema`` prints, so that an editor knows ``http:`` once toolflow-http is
        installed. Each added key's schema carries ``x-toolflow-plugin`` (the plugin's name) and a
        ``description`` naming the plugin and its distribution; the kinds the shipped schema already
        declares (``template``, ``command``, ``pipeline``) stay as shipped.
        """
        schema = json.loads(json.dumps(spec_schema()))  # a deep copy of the cached document
        properties = schema["definitions"]["tool"]["properties"]
        infos = {info.name: info for info in self.infos}
        for name, (kind, *_) in self.kinds().items():
            if name in properties:
                continue
            info = infos.get(kind.plugin)
            origin = " ".join(filter(None, (info.distribution, info.version))) if info else ""
            source = f"plugin {kind.plugin!r}" + (f", distribution {origin}" if origin else "")
            summary = kind.description or kind.schema.get("description") or f"The {name!r} implementation kind."
            properties[name] = {
                **kind.schema,
                "description": f"{summary.rstrip('.')}. From {source}.",
                "x-toolflow-plugin": kind.plugin,
            }
        return schema  # type: ignore[no-any-return]

    def lint_rules(self) -> list[tuple[str, Rule]]:
        """``(plugin name, rule)`` for every lint rule plugins register; ``rule.plugin`` is filled in."""
        return [(rule.plugin or "", rule) for rule in self._items(LINT_RULES)]

    def registered(self, hook_name: str) -> dict[str, list[tuple[str, Any]]]:
        """For ``register(name, factory)`` hooks (cache backends, model providers): name to ``(plugin, factory)``."""
        if hook_name not in REGISTER_HOOKS or hook_name in (IMPLEMENTATIONS, KINDS, LINT_RULES):
            msg = f"{hook_name!r} is not a register(name, factory) hook{did_you_mean(hook_name, REGISTER_HOOKS)}"
            raise ValueError(msg)
        found: dict[str, list[tuple[str, Any]]] = {}
        for plugin, contributions in self._contributions.items():
            for name, factory in contributions.get(hook_name, ()):
                found.setdefault(name, []).append((plugin, factory))
        return found

    def lint_facts(self) -> PluginFacts:
        """What the TF4xx lint rules need: bindings, their targets, and the plugins that failed."""
        bindings = self.bindings()
        return PluginFacts(
            bindings={name: tuple(b.plugin for b in found) for name, found in bindings.items()},
            targets={name: found[0].target for name, found in bindings.items()},
            failed={i.name: i.error or "unknown error" for i in self.infos if i.status == "failed"},
            kinds={name: tuple(k.plugin or "" for k in found) for name, found in self.kinds().items()},
        )

    def _admit(self, plugin: object, name: str) -> tuple[tuple[str, ...], dict[str, list[Any]]]:
        """Register *plugin* with pluggy and call its register hooks; undo and raise PluginError on a problem."""
        problem = self._taken(plugin, name)
        if problem is not None:
            raise PluginError(problem, plugin=name)
        try:
            self.manager.register(plugin, name=name)
        except (ValueError, pluggy.PluginValidationError) as exc:  # a hook with arguments its spec does not have
            raise PluginError(_one_line(exc), plugin=name) from exc
        try:
            return _known_hooks(self.manager, plugin), _call_register_hooks(self.manager, plugin, name)
        except PluginError:
            self.manager.unregister(plugin=plugin, name=name)
            raise

    def _taken(self, plugin: object, name: str) -> str | None:
        """Why *plugin* cannot be registered as *name*, when its name or object is in use already."""
        if plugin is None:
            return "the plugin object is None"
        other = self.manager.get_plugin(name)
        if other is not None:
            first = next((i for i in self.infos if i.name == name and i.status == "loaded"), None)
            where = f" from distribution {first.distribution}" if first and first.distribution else ""
            return f"another plugin named {name!r}{where} is registered already"
        if self.manager.is_registered(plugin):
            return f"the same object is registered already as plugin {self.manager.get_name(plugin)!r}"
        return None


def _one_line(error: BaseException) -> str:
    text = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _known_hooks(manager: pluggy.PluginManager, plugin: object) -> tuple[str, ...]:
    """The hooks *plugin* implements; a hook that does not exist is an error with a did-you-mean."""
    names: list[str] = []
    for caller in manager.get_hookcallers(plugin) or ():
        if caller.has_spec():
            names.append(caller.name)
            continue
        if all(impl.optionalhook for impl in caller.get_hookimpls() if impl.plugin is plugin):
            continue
        hint = did_you_mean(caller.name, sorted(HOOK_NAMES))
        msg = f"implements unknown hook {caller.name!r}{hint}"
        raise PluginError(msg)
    return tuple(sorted(names))


def _call_register_hooks(manager: pluggy.PluginManager, plugin: object, name: str) -> dict[str, list[Any]]:
    """Call each register hook that *plugin* implements once; return what it registered, checked."""
    found: dict[str, list[Any]] = {}
    for hook_name in REGISTER_HOOKS:
        caller = getattr(manager.hook, hook_name, None)
        impls = [impl for impl in caller.get_hookimpls() if impl.plugin is plugin] if caller else []
        for impl in impls:
            if impl.hookwrapper or impl.wrapper:
                msg = f"{hook_name} must not be a hook wrapper"
                raise PluginError(msg)
            collector = _Collector(hook_name, name)
            try:
                arguments = {"register": collector.register}
                returned = impl.function(*(arguments[a] for a in impl.argnames))
            except PluginError:
                raise
            except Exception as exc:
                msg = f"{hook_name} raised {_one_line(exc)}"
                raise PluginError(msg) from exc
            finally:
                collector.closed = True
            if inspect.isawaitable(returned):
                if inspect.iscoroutine(returned):
                    returned.close()
                msg = f"{hook_name} must be a plain function, not async"
                raise PluginError(msg)
            if returned is not None:
                msg = f"{hook_name} returned {type(returned).__name__}; call register(...) for each item instead"
                raise PluginError(msg)
            found.setdefault(hook_name, []).extend(collector.items)
    return found


class _Collector:
    """The ``register`` callback handed to one plugin's register hook: checks and keeps each item."""

    def __init__(self, hook_name: str, plugin: str) -> None:
        self.hook_name = hook_name
        self.plugin = plugin
        self.items: list[Any] = []
        self.names: set[str] = set()
        self.closed = False
        handlers: dict[str, Callable[..., None]] = {
            IMPLEMENTATIONS: self._implementation,
            KINDS: self._kind,
            LINT_RULES: self._lint_rule,
            TOOL_PACKS: self._tool_pack,
        }
        self.register = handlers.get(hook_name, self._named)

    def _fail(self, message: str) -> NoReturn:
        msg = f"{self.hook_name}: {message}"
        raise PluginError(msg)

    def _once(self, what: str, name: object) -> str:
        if self.closed:
            self._fail("register() called after the hook returned")
        if not isinstance(name, str) or not name:
            self._fail(f"{what} must be a non-empty string, not {name!r}")
        if name in self.names:
            self._fail(f"{what} {name!r} registered twice")
        self.names.add(name)
        return name

    def _implementation(self, name: str, target: Callable[..., Any] | str) -> None:
        self._once("implementation name", name)
        if isinstance(target, str):
            if not _LAZY_TARGET.match(target):
                self._fail(f"lazy target {target!r} of {name!r} is not 'module:attribute'")
        elif not callable(target):
            self._fail(f"target of {name!r} must be callable or a 'module:attribute' string, not {target!r}")
        self.items.append(Binding(name=name, target=target, plugin=self.plugin))

    def _kind(self, kind: ImplementationKind) -> None:
        if not isinstance(kind, ImplementationKind):
            self._fail(f"expected a toolflow.ImplementationKind, not {type(kind).__name__}")
        self._once("kind name", kind.name)
        if kind.name in _tool_keys():
            # The loader would read the key as both: `timeout: 5s` would also make the tool this kind.
            self._fail(f"kind name {kind.name!r} is a key of the spec format's tools; give the kind another name")
        if not isinstance(kind.schema, Mapping) or not callable(kind.build):
            self._fail(f"kind {kind.name!r} needs a schema mapping and a callable build")
        self.items.append(attrs.evolve(kind, plugin=self.plugin))

    def _lint_rule(self, rule: Rule) -> None:
        if not isinstance(rule, Rule):
            self._fail(f"expected a toolflow.LintRule, not {type(rule).__name__}")
        code = self._once("rule code", rule.code)
        if not _PLUGIN_RULE_CODE.match(code) or code.startswith("TF"):
            self._fail(f"rule code {code!r} must be the plugin's own prefix and digits (like 'ACME101'), never 'TF'")
        if not callable(rule.check) and not callable(rule.check_project):
            self._fail(f"rule {code} has no check")
        self.items.append(attrs.evolve(rule, plugin=self.plugin))

    def _tool_pack(self, name: str, files: Any) -> None:
        self._once("pack name", name)
        if not _PACK_NAME.match(name):
            self._fail(f"pack name {name!r} must be lower-case words joined by '-' or '_' (like 'http-examples')")
        if isinstance(files, str | os.PathLike) or not isinstance(files, Iterable):
            self._fail(f"the files of pack {name!r} must be a list of paths, not {files!r}")
        paths = tuple(str(path) for path in files)
        if not paths or not all(os.path.isfile(path) for path in paths):
            missing = [path for path in paths if not os.path.isfile(path)]
            self._fail(f"pack {name!r} needs existing spec files; not files: {missing or 'none given'}")
        self.items.append(ToolPack(name=name, files=paths, plugin=self.plugin))

    def _named(self, name: str, factory: Any) -> None:
        self._once("name", name)
        if not callable(factory):
            self._fail(f"factory of {name!r} must be callable, not {factory!r}")
        self.items.append((name, factory))


@functools.cache
def _tool_keys() -> frozenset[str]:
    """A tool's keys in the spec format, but for the built-in kinds (``template``, ``command``), which are plugins."""
    keys = spec_schema()["definitions"]["tool"]["properties"]
    return frozenset(keys) - {"template", "command"}


def make_manager() -> pluggy.PluginManager:
    """A fresh pluggy manager with toolflow's hook specifications and nothing registered."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    return manager


def load_plugins(
    *,
    builtins: bool = True,
    entry_points: bool = True,
    project_plugins: Sequence[str] = (),
    project_root: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    strict: bool = False,
) -> Plugins:
    """Build a plugin manager and load the plugins.

    The block-list (``TOOLFLOW_DISABLE_PLUGINS``) applies to every plugin, the
    builtins included; the allow-list (``TOOLFLOW_LOAD_PLUGINS``) to
    entry-point and project plugins. Names are compared like distribution
    names (case, ``-``, ``_`` and ``.`` do not matter). A plugin left out is
    never imported and is listed with status ``disabled``.

    Args:
        builtins: Register the default plugins (the ``template`` and ``command`` kinds).
        entry_points: Load third-party plugins from the ``toolflow`` entry-point group.
        project_plugins: Module names of local plugins (``[tool.toolflow] plugins``).
        project_root: Directory that local plugins (and their lazy targets) import from; it is put
            at the front of ``sys.path`` and stays there.
        environ: Where ``TOOLFLOW_LOAD_PLUGINS``/``TOOLFLOW_DISABLE_PLUGINS`` are read (default ``os.environ``).
        strict: Raise :class:`PluginError` instead of warning when a plugin fails.

    Raises:
        TypeError: *project_plugins* is a single module name rather than a list (whose
            characters would be loaded as plugins), or another argument of the wrong type.
        PluginError: With ``strict=True``, a plugin failed to load.
    """
    expect_names(project_plugins, "load_plugins: project_plugins", what="module names")
    expect(project_root, (str, os.PathLike, type(None)), "load_plugins: project_root", "a directory or None")
    expect(environ, (Mapping, type(None)), "load_plugins: environ", "a mapping or None")
    env = os.environ if environ is None else environ
    chosen = _Choice(allow=_names(env.get(LOAD_ENV)), block=_names(env.get(DISABLE_ENV)) or frozenset())
    plugins = Plugins(manager=make_manager(), strict=strict)
    if builtins:
        _load_builtins(plugins, chosen)
    if entry_points:
        _load_entry_points(plugins, chosen)
    if project_plugins and project_root is not None:
        folder = os.fspath(Path(project_root).resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)
    _load_project_plugins(plugins, project_plugins, chosen)
    return plugins


@attrs.frozen(kw_only=True)
class _Choice:
    """The allow-list (None: everything) and the block-list of plugin names, compared by :func:`_normal`."""

    allow: frozenset[str] | None
    block: frozenset[str]

    def wants(self, *names: str | None, allow_list: bool = True) -> bool:
        """Whether a plugin known by any of *names* is loaded (the builtins ignore the allow-list)."""
        named = {_normal(n) for n in names if n}
        if named & self.block:
            return False
        return self.allow is None or not allow_list or bool(named & self.allow)


def _load_builtins(plugins: Plugins, chosen: _Choice) -> None:
    for module_name in DEFAULT_PLUGINS:
        info: dict[str, Any] = {"distribution": DISTRIBUTION, "version": __version__, "module": module_name}
        if not chosen.wants(module_name, allow_list=False):
            plugins.infos.append(PluginInfo(name=module_name, source="builtin", status="disabled", **info))
            continue
        plugins.register(importlib.import_module(module_name), module_name, source="builtin", **info)


def _load_entry_points(plugins: Plugins, chosen: _Choice) -> None:
    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    for entry_point in sorted(found, key=lambda e: (e.name, e.dist.name if e.dist else "")):
        dist = entry_point.dist
        info: dict[str, Any] = {
            "distribution": dist.name if dist else None,
            "version": dist.version if dist else None,
            "module": entry_point.value,
        }
        if not chosen.wants(entry_point.name, info["distribution"], entry_point.module):
            plugins.infos.append(PluginInfo(name=entry_point.name, source="entry-point", status="disabled", **info))
            continue
        try:
            plugin = entry_point.load()
        except Exception as exc:  # noqa: BLE001 - any import failure is reported, not raised
            plugins.fail(entry_point.name, "entry-point", exc, **info)
            continue
        plugins.register(plugin, entry_point.name, source="entry-point", **info)


def _load_project_plugins(plugins: Plugins, module_names: Sequence[str], chosen: _Choice) -> None:
    for module_name in module_names:
        if not chosen.wants(module_name):
            plugins.infos.append(PluginInfo(name=module_name, source="project", status="disabled", module=module_name))
            continue
        try:
            plugin = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001 - any import failure is reported, not raised
            plugins.fail(module_name, "project", exc, module=module_name)
            continue
        plugins.register(plugin, module_name, source="project", module=module_name)
