"""Test helpers for plugin authors: an opt-in pytest plugin plus fakes.

Enable the fixtures in a ``conftest.py``::

    pytest_plugins = ["toolflow.testing"]

Fixtures:

``toolflow_plugins``
    An :class:`IsolatedPlugins`: a fresh plugin manager holding only toolflow's
    built-in default plugins (installed plugins are not loaded), in strict mode
    so a broken plugin fails the test. Register plugins with
    ``toolflow_plugins.register(plugin, "name")`` or bind one implementation
    with ``toolflow_plugins.bind("name", target)``; every registration is undone
    after the test.
``toolflow_project``
    A :class:`ToolflowProject` in a temporary directory: write spec files and
    ``pyproject.toml``, then load, build a registry or run ``toolflow lint``
    in-process.

The same plugin collects what ``toolflow test`` runs: each ``*.toolflow.yaml`` test file
(a scripted session, one item) and, in the spec files of the project (``[tool.toolflow]
specs`` at pytest's root directory, when pytest is asked to collect them, e.g. ``pytest
specs tests``), each example that declares ``expect``, ``expect_contains`` or
``expect_error`` (an item per example).

The fakes, :class:`FakeImplementation` and :class:`AsyncFakeImplementation`,
record their calls and return queued results; they work without pytest.
``import toolflow`` never imports this module.

PYTEST_DONT_REWRITE: the module has no asserts to rewrite, and tests may import
the fakes before pytest loads it as a plugin.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import textwrap
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Self, TypeVar

import attrs

from toolflow._plugins import Plugins, load_plugins
from toolflow.hookspecs import hookimpl

if TYPE_CHECKING:
    import pytest

    from toolflow._model import LoadResult
    from toolflow._registry import Registry

__all__ = [
    "ECHO",
    "AsyncFakeImplementation",
    "CliResult",
    "FakeImplementation",
    "IsolatedPlugins",
    "ToolflowProject",
    "isolated_plugins",
    "pytest_collect_file",
    "toolflow_plugins",
    "toolflow_project",
]

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_PYPROJECT = '[tool.toolflow]\nspecs = ["specs"]\n'
"""What a new :class:`ToolflowProject` holds in ``pyproject.toml``."""


# --- plugins ------------------------------------------------------------------------------


class _Binder:
    """A one-binding plugin made by :meth:`IsolatedPlugins.bind`."""

    def __init__(self, name: str, target: Any) -> None:
        self._name = name
        self._target = target

    @hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        register(self._name, self._target)


@attrs.define
class IsolatedPlugins(Plugins):
    """A :class:`~toolflow.Plugins` for tests: built-in plugins only, registrations undoable.

    Made by :func:`isolated_plugins` and the ``toolflow_plugins`` fixture, which
    calls :meth:`undo` after the test.
    """

    _added: list[str] = attrs.field(factory=list, init=False)

    def register(self, plugin: object, name: str | None = None, *, source: str = "manual", **info: Any) -> bool:
        """Register *plugin* (a module or an object with hook implementations).

        *name* defaults to the module's name, or the object's class name. In
        strict mode (the default here) a plugin that misnames a hook or fails to
        register raises :class:`~toolflow.PluginError`.

        Returns:
            True when the plugin was registered.
        """
        if name is None:
            name = getattr(plugin, "__name__", None) or type(plugin).__qualname__
        registered = super().register(plugin, name, source=source, **info)
        if registered:
            self._added.append(name)
        return registered

    def bind(self, name: str, target: Any, *, plugin: str | None = None) -> bool:
        """Register a plugin that binds implementation *name* to *target*.

        *target* is a callable (a fake, say) or a lazy ``"module:attr"`` string;
        *plugin* names the plugin (default ``bind[NAME]``).
        """
        return self.register(_Binder(name, target), plugin or f"bind[{name}]")

    def unregister(self, name: str) -> None:
        """Unregister the plugin registered as *name*, with its contributions (no-op when there is none)."""
        super().unregister(name)
        if name in self._added:
            self._added.remove(name)

    def undo(self) -> None:
        """Unregister every plugin registered since this manager was made; the built-ins stay."""
        for name in reversed(self._added.copy()):
            self.unregister(name)
        self.infos[:] = [info for info in self.infos if info.source == "builtin"]


def isolated_plugins(*, strict: bool = True) -> IsolatedPlugins:
    """A fresh plugin manager with only toolflow's built-in default plugins registered.

    Installed plugins (the ``toolflow`` entry points) and the environment
    variables ``TOOLFLOW_LOAD_PLUGINS``/``TOOLFLOW_DISABLE_PLUGINS`` are ignored,
    so a test sees exactly what it registers.
    """
    base = load_plugins(entry_points=False, environ={}, strict=strict)
    return IsolatedPlugins(**{field.alias or field.name: getattr(base, field.name) for field in attrs.fields(Plugins)})


# --- projects -----------------------------------------------------------------------------


class CliResult(NamedTuple):
    """What an in-process ``toolflow`` command returned and printed."""

    exit_code: int
    stdout: str
    stderr: str


def _text(text: str) -> str:
    """*text* dedented, without a leading newline, ending with one."""
    text = textwrap.dedent(text).removeprefix("\n")
    return text if text.endswith("\n") or not text else text + "\n"


def _plain(value: Any) -> Any:
    """*value* with mappings as dicts and tuples as lists, so that ``yaml.safe_dump`` takes it."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


@contextlib.contextmanager
def _environment(changes: Mapping[str, str | None]) -> Iterator[None]:
    """Set (or, for ``None``, remove) environment variables, restoring them afterwards."""
    saved = {name: os.environ.get(name) for name in changes}
    try:
        for name, value in changes.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class ToolflowProject:
    """A project directory for tests: spec files under ``specs/`` and a ``pyproject.toml``.

    It starts with a ``pyproject.toml`` holding ``[tool.toolflow] specs =
    ["specs"]`` (so no configuration above the directory leaks in) and no specs.

    Attributes:
        root: The project directory.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "pyproject.toml").write_text(DEFAULT_PYPROJECT, encoding="utf-8")

    def __repr__(self) -> str:
        return f"ToolflowProject({os.fspath(self.root)!r})"

    @property
    def specs_dir(self) -> Path:
        """The directory :meth:`write_spec` writes into: ``root/specs``."""
        return self.root / "specs"

    def write(self, relpath: str | os.PathLike[str], text: str) -> Path:
        """Write a file at *relpath* under the project root (a local plugin module, say).

        The text is dedented and a leading newline dropped, so a triple-quoted
        string can be indented with the test. Returns the file's path.
        """
        path = self.root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_text(text), encoding="utf-8")
        return path

    def write_spec(self, relpath: str | os.PathLike[str], spec: str | Mapping[str, Any]) -> Path:
        """Write a spec file at *relpath* under ``specs/``; return its path.

        *spec* is YAML text (dedented like :meth:`write`, written as given
        otherwise) or a mapping, dumped as YAML with ``toolflow: 1`` added
        first when it is missing.
        """
        if isinstance(spec, str):
            text = spec
        else:
            import yaml  # noqa: PLC0415 - only mappings need dumping

            document = _plain(spec)
            if "toolflow" not in document:
                document = {"toolflow": 1, **document}
            text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
        return self.write(Path("specs") / relpath, text)

    def pyproject(self, toml: str) -> Path:
        """Replace ``pyproject.toml`` with *toml* (dedented); return its path."""
        return self.write("pyproject.toml", toml)

    def spec_paths(self) -> list[str]:
        """The project's spec paths: ``[tool.toolflow] specs`` of its pyproject.toml, absolute."""
        from toolflow._project import load_project  # noqa: PLC0415

        with contextlib.chdir(self.root):
            return [os.path.abspath(path) for path in load_project().specs]

    def plugins(self, *, strict: bool = True) -> Plugins:
        """The project's plugins: the built-ins plus ``[tool.toolflow] plugins``, imported from the root.

        Installed plugins (entry points) are not loaded, so the test stays
        isolated from the environment. Strict by default: a local plugin that
        fails raises :class:`~toolflow.PluginError`; with ``strict=False`` it
        warns and is recorded as failed.
        """
        from toolflow._project import load_project  # noqa: PLC0415

        with contextlib.chdir(self.root):
            config = load_project()
        importlib.invalidate_caches()  # modules the test just wrote must be importable
        return load_plugins(
            entry_points=False,
            project_plugins=config.plugins,
            project_root=self.root,
            environ={},
            strict=strict,
        )

    def load(self, plugins: Plugins | None = None) -> LoadResult:
        """Load the project's specs, with the implementation kinds of *plugins*.

        *plugins* defaults to :meth:`plugins`. ``${VAR}`` reads the process
        environment (set variables with ``monkeypatch.setenv``). Never raises on
        bad specs: the problems are the result's ``diagnostics``.
        """
        from toolflow._loader import load_specs  # noqa: PLC0415

        plugins = self.plugins() if plugins is None else plugins
        return load_specs(self.spec_paths(), **plugins.loader_options())

    def registry(self, plugins: Plugins | None = None) -> Registry:
        """Load the specs and build the registry with *plugins* (default: :meth:`plugins`).

        Raises:
            SpecError: The specs have errors.
            RegistryError: An implementation is unbound, bound twice, or of an unknown kind.
        """
        from toolflow._registry import Registry  # noqa: PLC0415

        plugins = self.plugins() if plugins is None else plugins
        return Registry.build(self.load(plugins), plugins)

    def run(self, *args: str, env: Mapping[str, str | None] | None = None) -> CliResult:
        """Run ``toolflow ARGS`` in-process with the project as working directory.

        The command discovers plugins as it does for users (installed entry
        points and ``[tool.toolflow] plugins``); *env* sets environment
        variables for the run (``None`` removes one), e.g.
        ``{"TOOLFLOW_DISABLE_PLUGINS": "other"}``.
        """
        from toolflow._cli import run  # noqa: PLC0415

        stdout, stderr = io.StringIO(), io.StringIO()
        importlib.invalidate_caches()  # local plugin modules the test just wrote must be importable
        with contextlib.chdir(self.root), _environment(env or {}):
            code = run(list(args), stdout=stdout, stderr=stderr)
        return CliResult(code, stdout.getvalue(), stderr.getvalue())

    def lint(self, *args: str, env: Mapping[str, str | None] | None = None) -> CliResult:
        """Run ``toolflow lint ARGS`` in-process in the project: ``(exit code, stdout, stderr)``."""
        return self.run("lint", *args, env=env)

    def forget_imports(self) -> None:
        """Undo what importing the project's local plugins did: drop its modules and its ``sys.path`` entry.

        The next project may then hold a module of the same name and get its own.
        """
        root = os.path.realpath(self.root)
        # dict.copy() takes the modules at once: listing the live items lets a worker thread's
        # import change the dict in the middle ("dictionary changed size during iteration").
        for name, module in sys.modules.copy().items():
            file = getattr(module, "__file__", None)
            if file and os.path.realpath(file).startswith(root + os.sep):
                sys.modules.pop(name, None)
        sys.path[:] = [entry for entry in sys.path if not entry or os.path.realpath(entry) != root]


# --- fakes --------------------------------------------------------------------------------


class _Echo:
    def __repr__(self) -> str:
        return "ECHO"


ECHO: Any = _Echo()
"""The default result of a fake: ``{"success": True, "data": <the arguments>}``."""


class _Fake:
    """Shared state of the fakes: the recorded calls and the queue of outcomes."""

    def __init__(self, default: Any = ECHO, *, name: str = "fake") -> None:
        self.name = name
        self.default = default
        self.calls: list[dict[str, Any]] = []
        self._queue: deque[tuple[bool, Any]] = deque()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, calls={len(self.calls)}, queued={len(self._queue)})"

    def returns(self, *values: Any) -> Self:
        """Queue *values*: each later call returns the next one. Returns the fake, for chaining."""
        self._queue.extend((False, value) for value in values)
        return self

    def raises(self, *errors: BaseException | type[BaseException]) -> Self:
        """Queue exceptions (instances or classes): each later call raises the next one."""
        self._queue.extend((True, error) for error in errors)
        return self

    @property
    def call_count(self) -> int:
        """How many times the fake was called."""
        return len(self.calls)

    @property
    def last_call(self) -> dict[str, Any] | None:
        """The arguments of the latest call, or ``None`` before the first."""
        return self.calls[-1] if self.calls else None

    def reset(self) -> None:
        """Forget the recorded calls and the queued outcomes."""
        self.calls.clear()
        self._queue.clear()

    def _record(self, arguments: dict[str, Any]) -> None:
        self.calls.append(dict(arguments))

    def _next(self, arguments: dict[str, Any]) -> Any:
        if self._queue:
            is_error, value = self._queue.popleft()
            if is_error:
                raise value
            return value
        if self.default is ECHO:
            return {"success": True, "data": dict(arguments)}
        return self.default


class FakeImplementation(_Fake):
    """A synchronous implementation for tests: records calls, returns queued outcomes.

    Each call appends its keyword arguments to :attr:`calls`, then returns the
    next value queued with :meth:`returns` or raises the next exception queued
    with :meth:`raises`, in the order they were queued. With nothing queued it
    returns *default*, which by default echoes the arguments as
    ``{"success": True, "data": {...arguments}}``.

    Example::

        fake = FakeImplementation().returns({"temp": 21}).raises(TimeoutError("slow"))
        toolflow_plugins.bind("weather.current", fake)
    """

    def __call__(self, **arguments: Any) -> Any:
        """Record the call, then return or raise the next queued outcome (or the default)."""
        self._record(arguments)
        return self._next(arguments)


class AsyncFakeImplementation(_Fake):
    """The async variant of :class:`FakeImplementation`, for code that awaits its implementation.

    Each call is recorded, then waits *delay* seconds (``trio.sleep``, so it is
    always a checkpoint and can be cancelled or timed out), then returns or
    raises like the sync fake. A ``ctx`` keyword, if the engine passes one, is
    kept in :attr:`contexts` rather than in :attr:`calls`.
    """

    def __init__(self, default: Any = ECHO, *, name: str = "fake", delay: float = 0.0) -> None:
        super().__init__(default, name=name)
        self.delay = delay
        self.contexts: list[Any] = []

    async def __call__(self, *, ctx: Any = None, **arguments: Any) -> Any:
        """Record the call, wait *delay* seconds, then return or raise the next queued outcome."""
        import trio  # noqa: PLC0415 - the engine's async library; only needed once awaited

        self._record(arguments)
        self.contexts.append(ctx)
        await trio.sleep(self.delay)
        return self._next(arguments)

    def reset(self) -> None:
        """Forget the recorded calls, contexts and queued outcomes."""
        super().reset()
        self.contexts.clear()


# --- pytest fixtures ----------------------------------------------------------------------


def _fixture(function: F) -> F:
    """``pytest.fixture(function)``, or *function* unchanged where pytest is not installed."""
    try:
        import pytest  # noqa: PLC0415 - only a test dependency; the fakes work without it
    except ModuleNotFoundError:  # pragma: no cover - exercised in a subprocess without pytest
        return function
    return pytest.fixture(function)  # type: ignore[return-value]


@_fixture
def toolflow_plugins() -> Iterator[IsolatedPlugins]:
    """An isolated plugin manager (built-ins only, strict); registrations are undone after the test."""
    plugins = isolated_plugins()
    try:
        yield plugins
    finally:
        plugins.undo()


@_fixture
def toolflow_project(tmp_path: Path) -> Iterator[ToolflowProject]:
    """A temporary project directory (``tmp_path/project``) with spec and CLI helpers."""
    project = ToolflowProject(tmp_path / "project")
    try:
        yield project
    finally:
        project.forget_imports()


# --- collecting toolflow test's cases -----------------------------------------------------


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect ``*.toolflow.yaml`` test files and the tested examples of the project's spec files."""
    if not file_path.name.endswith((".yaml", ".yml")):
        return None  # most files pytest visits: decided without importing the engine
    from toolflow._testing_items import collect_file  # noqa: PLC0415 - needs pytest and the engine

    return collect_file(file_path, parent)
