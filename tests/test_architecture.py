"""The house rules a reader relies on: imports flow one way, functions and modules stay small.

Each module imports only from its own layer or the layers below it, and no modules import each
other round a loop. The layer table is DESIGN.md's, for the modules that exist (docs/design.md
keeps the record). Every import counts, including those inside functions and under
``TYPE_CHECKING``. Then: no function above cyclomatic complexity 15 (radon), no module above
750 lines, and every exception class drawn in the docstring of ``toolflow/_errors.py``.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from radon.complexity import cc_visit
from radon.visitors import Class, Function

PACKAGE = Path(__file__).resolve().parent.parent / "toolflow"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("errors, diagnostics", ("toolflow._errors", "toolflow._diagnostics", "toolflow._json")),
    (
        "model",
        (
            "toolflow._model",
            "toolflow._results",
            "toolflow._calls",
            "toolflow._categories",
            "toolflow._policy",
            "toolflow._rules",
            "toolflow._provenance",
        ),
    ),
    (
        "schemas, templates",
        (
            "toolflow._schemas",
            "toolflow._templates",
            "toolflow._template_values",
            "toolflow._template_guards",
            "toolflow._checking",
            "toolflow._validation",
            "toolflow._gates_document",
        ),
    ),
    ("yaml, loader", ("toolflow._yaml", "toolflow._loader", "toolflow._mcp_specs", "toolflow._project")),
    ("lint", ("toolflow._lint",)),
    ("hookspecs, plugins", ("toolflow.hookspecs", "toolflow._plugins", "toolflow._telemetry")),
    (
        "registry, export",
        (
            "toolflow._pipeline_plan",
            "toolflow._registry",
            "toolflow._tool_references",
            "toolflow._export",
            "toolflow._retrying",
            "toolflow._cache",
            "toolflow._state",
            "toolflow._conversation",
            "toolflow._state_redis",
            "toolflow._state_config",
        ),
    ),
    (
        "executor",
        (
            "toolflow._approval",
            "toolflow._attempts",
            "toolflow._batch",
            "toolflow._bound",
            "toolflow._engine_arguments",
            "toolflow._gates",
            "toolflow._limits",
            "toolflow._invoke",
            "toolflow._mcp_stdio",
            "toolflow._mcp_http",
            "toolflow._mcp_sources",
            "toolflow._executor",
            "toolflow._pipelines",
            "toolflow._store_access",
            "toolflow._context",
            "toolflow._rendering",
            "toolflow._raised",
        ),
    ),
    (
        "loop",
        (
            "toolflow._providers",
            "toolflow._history_text",
            "toolflow._history_gemini",
            "toolflow._history",
            "toolflow._loop_texts",
            "toolflow._model_calls",
            "toolflow._loop_parts",
            "toolflow._loop_records",
            "toolflow._deferred",
            "toolflow._run_state",
            "toolflow._deliberate",
            "toolflow._restart",
            "toolflow._background",
            "toolflow._loop",
        ),
    ),
    (
        "cli, testing, default plugins",
        (
            "toolflow._cli",
            "toolflow._cli_call",
            "toolflow._cli_completion",
            "toolflow._cli_graph",
            "toolflow._cli_init",
            "toolflow._cli_lint_connect",
            "toolflow._cli_parsers",
            "toolflow._cli_tables",
            "toolflow._cli_run",
            "toolflow._cli_support",
            "toolflow._cli_test",
            "toolflow._cli_test_report",
            "toolflow._docgen",
            "toolflow.__main__",
            "toolflow.testing",
            "toolflow._testing_items",
            "toolflow.default_plugins",
            "toolflow._serve",
            "toolflow._serve_approval",
            "toolflow._serve_conversation",
            "toolflow._serve_fleet",
            "toolflow._serve_http",
            "toolflow._serve_progress",
            "toolflow._serve_stdio",
            "toolflow._serve_tasks",
            "toolflow._task_records",
            "toolflow._shutdown",
        ),
    ),
)
"""Lowest first; an entry names a module or a package (with everything under it)."""

FRONT_DOOR = "toolflow"
"""The package itself re-exports the public API lazily; it may import anything."""

ANYWHERE_FROM_FRONT_DOOR = frozenset({"__version__"})
"""Names any module may import from ``toolflow`` itself: constants that import nothing."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _layer(module: str) -> int | None:
    for index, (_, members) in enumerate(LAYERS):
        if any(module == m or module.startswith(m + ".") for m in members):
            return index
    return None


def _imports(module: str) -> Iterator[tuple[str, int, str]]:
    """Yield ``(imported toolflow module or top-level package, line, imported name)`` for *module*."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, ""
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                candidate = f"{source}.{alias.name}"
                yield (candidate if candidate in MODULES else source), node.lineno, alias.name


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def test_every_module_has_a_layer() -> None:
    """Each module of the package is placed in the layer table (add new modules to it)."""
    unplaced = [m for m in MODULES if m != FRONT_DOOR and _layer(m) is None]
    assert not unplaced, f"add these modules to LAYERS in tests/test_architecture.py: {unplaced}"


@pytest.mark.parametrize("module", [m for m in MODULES if m != FRONT_DOOR])
def test_no_upward_imports(module: str) -> None:
    """A module imports toolflow modules of its own layer or lower layers only."""
    own = _layer(module)
    assert own is not None
    problems = []
    for imported, line, name in _imports(module):
        if _top(imported) != "toolflow":
            continue
        if imported == FRONT_DOOR:
            if name not in ANYWHERE_FROM_FRONT_DOOR:
                problems.append(f"line {line}: imports {name or 'toolflow'!r} from the public API (the top)")
            continue
        target = _layer(imported)
        if target is None or target > own:
            where = LAYERS[target][0] if target is not None else "no layer"
            problems.append(f"line {line}: imports {imported} ({where}) from layer {LAYERS[own][0]!r}")
    assert not problems, f"{module}:\n" + "\n".join(problems)


def test_front_door_imports_lazily() -> None:
    """toolflow/__init__.py imports no toolflow module at import time, only under TYPE_CHECKING or on use."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    eager = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        if any(_top(name) == "toolflow" for name in names):
            eager.append(node.lineno)
    assert not eager, f"eager imports on lines {eager}"


TRIO_LAYERS = frozenset({"executor", "loop", "cli, testing, default plugins"})
"""Only the executor, the loop and the front ends above them may import trio."""


def test_trio_stays_above_the_registry() -> None:
    """Modules below the executor never import trio, so loading, linting and the registry stay trio-free."""
    offenders = [
        f"{m}:{line}"
        for m in MODULES
        if m != FRONT_DOOR and LAYERS[_layer(m) or 0][0] not in TRIO_LAYERS
        for imported, line, _ in _imports(m)
        if _top(imported) == "trio"
    ]
    assert not offenders, f"trio imported at {offenders}"


def test_lint_never_imports_pluggy() -> None:
    """Lint modules stay free of the plugin system, so `toolflow lint` starts fast."""
    lint = _layer("toolflow._lint")
    offenders = [
        f"{m}:{line}"
        for m in MODULES
        if _layer(m) == lint
        for imported, line, _ in _imports(m)
        if _top(imported) == "pluggy"
    ]
    assert not offenders, f"pluggy imported at {offenders}"


def test_layer_table_matches_the_modules_present() -> None:
    """Every entry of the layer table names a module or package that exists."""
    for _, members in LAYERS:
        for member in members:
            assert member in MODULES, f"{member} is in LAYERS but not in the package"


def test_import_parser_resolves_relative_and_submodule_imports() -> None:
    """`from toolflow import _yaml` counts as importing toolflow._yaml, not the public API."""
    imported = {name for name, _, _ in _imports("toolflow._loader")}
    assert "toolflow._yaml" in imported
    assert "toolflow" not in imported


LINT_NEVER_IMPORTS = (
    "trio",
    "trio_parallel",
    "multiprocessing",
    "httpx",
    "toolflow._rendering",
    "toolflow_assistant.tools",
    "toolflow._executor",
    "toolflow._loop",
    "toolflow._history",
    "toolflow._providers",
    "toolflow.default_plugins._scripted",
    "toolflow.default_plugins._openai_chat",
    "toolflow.default_plugins._anthropic_messages",
    "toolflow.default_plugins._http_provider",
    # the runtime policy and what it imports: lint reads the categories' defaults from toolflow._categories
    "toolflow._policy",
    "toolflow._calls",
    "toolflow._rules",
    # the command kind's runner, and what it imports: registering the kind loads none of it
    "toolflow.default_plugins._command_run",
    "toolflow._telemetry",
    "subprocess",
    "signal",
)
"""Modules that ``toolflow lint`` (and ``toolflow graph``) never import: the runtime, and plugins' implementations."""


def _imported_by_cli(argv: list[str], cwd: Path, never: tuple[str, ...] = LINT_NEVER_IMPORTS) -> tuple[int, list[str]]:
    """Run the CLI with *argv* in a fresh interpreter; its exit status and which of *never* it loaded."""
    code = (
        "import io, sys\n"
        "from toolflow._cli import run\n"
        "out = io.StringIO()\n"
        f"status = run({argv!r}, stdout=out, stderr=out)\n"
        f"print(status, sorted(m for m in {never!r} if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60, cwd=cwd
    )
    status, loaded = result.stdout.strip().split(" ", 1)
    return int(status), ast.literal_eval(loaded)


@pytest.mark.parametrize("command", [["lint", "--isolated"], ["graph"]])
def test_lint_run_imports_neither_trio_nor_implementations(tmp_path: Path, command: list[str]) -> None:
    """Linting (and drawing the graph) from the command line loads plugins but neither trio, any plugin's
    implementations, the loop's modules, nor the runtime policy's modules."""
    spec = tmp_path / "say.yaml"
    spec.write_text(
        "toolflow: 1\ntools:\n  say:\n    description: Say something to the room.\n"
        "    category: terminal\n    template: hello\n",
        encoding="utf-8",
    )
    assert _imported_by_cli([*command, str(spec)], tmp_path) == (0, [])


def test_lint_of_a_project_without_templates_imports_no_jinja2(tmp_path: Path) -> None:
    """Jinja2 is lint's only for templates: a project whose tools have no template, command or pipeline (nor
    http: value) is linted, plugins and their rules included, without importing it."""
    spec = tmp_path / "worker.yaml"
    spec.write_text(
        "toolflow: 1\ntools:\n  list_directory:\n    description: List the names in a directory.\n"
        "    parameters:\n      type: object\n      properties:\n"
        "        path: {type: string, description: The directory.}\n      required: [path]\n"
        "    implementation: worker.list_directory\n",
        encoding="utf-8",
    )
    never = (*LINT_NEVER_IMPORTS, "jinja2", "toolflow._templates", "toolflow._template_guards")
    assert _imported_by_cli(["lint", "--isolated", str(spec)], tmp_path, never) == (0, [])


def test_lint_of_the_shipped_specs_imports_no_runtime() -> None:
    """`toolflow lint specs/`, as CI runs it (a policy, pipelines, command tools, the plugins' kinds and rules),
    loads none of the runtime: no trio, no runtime policy, no command runner, subprocess or signal."""
    assert _imported_by_cli(["lint", "specs"], PACKAGE.parent) == (0, [])


def test_import_toolflow_loads_no_submodule() -> None:
    """`import toolflow` alone imports none of its private modules."""
    code = "import sys, toolflow\nprint(sorted(m for m in sys.modules if m.startswith('toolflow.')))\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "[]"


def test_no_import_cycles() -> None:
    """No two modules import each other, directly or round a loop, even lazily inside a function.

    A module imported by a module it imports is half of one job: move the shared part below both
    (as ``_cli_support`` is below ``_cli``, ``_cli_call`` and ``_cli_run``).
    """
    graph = {
        module: sorted({i for i, _, _ in _imports(module) if i in MODULES and i not in {module, FRONT_DOOR}})
        for module in MODULES
        if module != FRONT_DOOR
    }
    done: set[str] = set()

    def cycle_from(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for imported in graph[module]:
            found = cycle_from(imported, [*path, module])
            if found is not None:
                return found
        done.add(module)
        return None

    for module in graph:
        cycle = cycle_from(module, [])
        assert cycle is None, "import cycle: " + " -> ".join(cycle)


MAX_COMPLEXITY = 15
"""The highest cyclomatic complexity (radon's) of a function or method in the package."""

MAX_LINES = 750
"""The most lines a module of the package may have (pluggy's largest module is about this long)."""

COMPLEXITY_EXEMPT = "toolflow/_lint/rules/"
"""Lint rules are exempt: each is one small module whose check branches over the cases of its rule."""

# issue 15: being split/simplified by the lead (_executor.py, _validation.py), the "loop" helper
# (_calls.py, _loop.py, default_plugins/_scripted.py) and the "lint" helper (_checking.py,
# _yaml.py, _lint/); the lead empties both lists when the branches merge. Do not add to them.
TEMPORARY_COMPLEXITY: frozenset[tuple[str, str]] = frozenset()
TEMPORARY_LONG_MODULES: frozenset[str] = frozenset()


def _sources() -> Iterator[tuple[str, str]]:
    for path in MODULES.values():
        yield path.relative_to(PACKAGE.parent).as_posix(), path.read_text(encoding="utf-8")


def _functions(blocks: list[Function | Class], outer: str = "") -> Iterator[tuple[str, Function]]:
    """``(qualified name, function)`` of every function, method and closure among radon's *blocks*."""
    for block in blocks:
        name = f"{outer}{block.name}" if outer or isinstance(block, Class) else block.fullname
        if isinstance(block, Class):
            yield from _functions([*block.methods, *block.inner_classes], f"{name}.")
        else:
            yield name, block
            yield from _functions(block.closures, f"{name}.")


def _complexities() -> dict[tuple[str, str], int]:
    """``(module path, Class.function)`` -> radon's cyclomatic complexity, for the whole package."""
    return {
        (path, name): function.complexity
        for path, source in _sources()
        for name, function in _functions(cc_visit(source))
    }


def test_no_function_is_too_complex() -> None:
    """No function or method has a cyclomatic complexity above 15 (radon), lint rules apart.

    Split such a function where its cases part (one helper per case, a table of handlers) so a
    reader holds one case at a time.
    """
    too_complex = [
        f"{path}: {name} has cyclomatic complexity {complexity} (at most {MAX_COMPLEXITY})"
        for (path, name), complexity in sorted(_complexities().items())
        if complexity > MAX_COMPLEXITY
        and not path.startswith(COMPLEXITY_EXEMPT)
        and (path, name) not in TEMPORARY_COMPLEXITY
    ]
    assert not too_complex, "\n".join(too_complex)


def test_no_module_is_too_long() -> None:
    """No module of the package has more than 750 lines: split it by job (as _cli, _cli_call and _cli_run are)."""
    too_long = [
        f"{path} has {lines} lines (at most {MAX_LINES})"
        for path, source in _sources()
        if (lines := len(source.splitlines())) > MAX_LINES and path not in TEMPORARY_LONG_MODULES
    ]
    assert not too_long, "\n".join(too_long)


def test_the_temporary_lists_name_only_offenders() -> None:
    """An entry of the temporary lists that is fixed (or gone) must leave the list, so the lists only shrink."""
    complexities = _complexities()
    stale = [
        f"{path}: {name}"
        for path, name in sorted(TEMPORARY_COMPLEXITY)
        if complexities.get((path, name), 0) <= MAX_COMPLEXITY
    ]
    lines = {path: len(source.splitlines()) for path, source in _sources()}
    stale += [path for path in sorted(TEMPORARY_LONG_MODULES) if lines.get(path, 0) <= MAX_LINES]
    assert not stale, "no longer too complex or too long; remove from the temporary lists: " + ", ".join(stale)


_TREE_LINE = re.compile(
    r"(?P<indent>(?:│   |    )*)(?P<branch>[├└]── )?(?P<name>[A-Z]\w*)"
    r"(?:\s.*?)??(?:\(exit (?P<exit>\d)\))?(?:\s+(?P<module>_\w+))?\s*"
)
"""A line of the drawing: the branches, the class, what it is, ``(exit N)`` and its module."""


def _drawn_exceptions() -> dict[str, tuple[str | None, int | None, str]]:
    """``name -> (drawn base, exit code, module)`` of the tree in toolflow/_errors.py's docstring."""
    doc = ast.get_docstring(ast.parse((PACKAGE / "_errors.py").read_text(encoding="utf-8"))) or ""
    drawing = textwrap.dedent(doc.split("::\n\n", 1)[1].split("\n\n", 1)[0])
    drawn: dict[str, tuple[str | None, int | None, str]] = {}
    parents: list[str] = []
    for line in drawing.splitlines():
        match = _TREE_LINE.fullmatch(line)
        assert match is not None, f"cannot read this line of the drawing: {line!r}"
        depth = len(match["indent"]) // 4 + 1 if match["branch"] else 0
        del parents[depth:]
        exit_code = int(match["exit"]) if match["exit"] else None
        drawn[match["name"]] = (parents[-1] if parents else None, exit_code, match["module"] or "_errors")
        parents.append(match["name"])
    return drawn


def _exception_classes() -> Iterator[type[BaseException]]:
    for module in MODULES:
        if module == "toolflow.__main__":
            continue
        for value in vars(importlib.import_module(module)).values():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == module:
                yield value


def test_the_errors_docstring_draws_every_exception_class() -> None:
    """Each exception and warning class of the package is in _errors.py's tree, under its base, with its exit code."""
    drawn = _drawn_exceptions()
    problems = []
    for cls in _exception_classes():
        where = f"{cls.__module__}.{cls.__qualname__}"
        if cls.__name__ not in drawn:
            problems.append(f"{where} is not drawn in the docstring of toolflow/_errors.py")
            continue
        base, exit_code, module = drawn.pop(cls.__name__)
        if base not in {b.__name__ for b in cls.__bases__}:
            problems.append(f"{where} is drawn under {base}, but its bases are {[b.__name__ for b in cls.__bases__]}")
        if exit_code != getattr(cls, "exit_code", None):
            problems.append(
                f"{where} is drawn with exit {exit_code}, its exit_code is {getattr(cls, 'exit_code', None)}"
            )
        if f"toolflow.{module}" != cls.__module__:
            problems.append(f"{where} is drawn as defined in {module}")
    problems += [f"{name} is drawn but not defined" for name in drawn if name not in {"Exception", "UserWarning"}]
    assert not problems, "\n".join(problems)
