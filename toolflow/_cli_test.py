"""``toolflow test``: declarative tests of tools, written in YAML (issue 17, section 3).

Two kinds of test, both run through a real engine (:func:`~toolflow.open_engine`) with the
project's plugins and specs:

* an **example** of a tool that declares an expected outcome (``expect``, ``expect_contains``
  or ``expect_error``): one call with the example's ``args``, as ``toolflow call`` makes it;
* a **test file** (``*.toolflow.yaml``): a scripted model session (the transcript format of
  ``toolflow run --model scripted:FILE``, inline or named by ``session``) and the loop's
  expected outcome (``expect``: ``reason``, ``tools``, ``answer_contains``, ``turns``), run
  through :class:`~toolflow.Agent`; or a ``sessions`` list of such sessions, each with a
  ``name``, a test each.

Each test gets an engine of its own, so caches and ``depends_on`` history start empty; the
persistent cache is a file in a temporary directory, never the project's. The pytest plugin
(:mod:`toolflow.testing`) runs the same cases through :func:`collect_examples`,
:func:`session_cases` and :func:`run_cases`. The records of cases and outcomes, and the
reports, are in :mod:`toolflow._cli_test_report`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
import yaml

from toolflow._calls import ToolCall
from toolflow._cli_support import approver, run_trio, spec_paths
from toolflow._cli_test_report import Case, Outcome, outcome_line, render
from toolflow._context import providing_context
from toolflow._diagnostics import Locator
from toolflow._errors import SpecError, ToolflowError, UsageError
from toolflow._executor import open_engine
from toolflow._loader import SPEC_SUFFIXES, TEST_SUFFIXES, load_specs
from toolflow._loop import Agent, LoopResult
from toolflow._mcp_sources import open_registry
from toolflow._model import Example, LoadResult
from toolflow._plugins import Plugins
from toolflow._policy import Policy
from toolflow._registry import Registry
from toolflow._results import ToolResult, json_text
from toolflow._schemas import json_pointer
from toolflow._yaml import DocumentError, load_data
from toolflow.default_plugins._scripted import ScriptedProvider, open_scripted

__all__ = [
    "Case",
    "Outcome",
    "collect_examples",
    "command",
    "contains",
    "example_failure",
    "find_test_files",
    "run_cases",
    "same",
    "session_case",
    "session_cases",
]

TEST_KEYS = frozenset(
    {"description", "specs", "format", "approve", "context", "session", "system", "prompt", "turns", "expect"}
)
SESSIONS_FILE_KEYS = frozenset({"description", "specs", "format", "approve", "context", "sessions"})
"""The keys of a test file that lists its sessions; each entry has ``name`` and the keys of a one-session file."""
EXPECT_KEYS = frozenset({"reason", "tools", "answer_contains", "turns"})
_TRANSCRIPT_KEYS = ("system", "prompt", "turns")


# --- comparing ------------------------------------------------------------------------------


def _json(value: Any) -> str:
    return json_text(value, separators=(", ", ": "))


def _shorten(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kind(value: Any) -> str:
    """The JSON type of a scalar: ``true`` is a boolean, not a number; ``1`` and ``1.0`` are both numbers."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else type(value).__name__


def same(data: Any, expected: Any) -> bool:
    """Whether *data* equals *expected* as JSON values: ``true`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(expected, Mapping):
        return (
            isinstance(data, Mapping)
            and set(data) == set(expected)
            and all(same(data[key], value) for key, value in expected.items())
        )
    if isinstance(expected, list | tuple):
        return (
            isinstance(data, list | tuple)
            and len(data) == len(expected)
            and all(same(d, e) for d, e in zip(data, expected, strict=True))
        )
    return _kind(data) == _kind(expected) and bool(data == expected)


def contains(data: Any, expected: Any) -> bool:
    """Whether *data* contains *expected*: the rule of ``expect_contains``.

    A string is in a string, or in the JSON of any other value (``json.dumps``: ``", "`` and
    ``": "`` between items); a mapping is a subset, each of its values contained in the
    data's value of the same key; a list's items are each contained in some item of the data's
    list, in any order; any other value is equal (:func:`same`).
    """
    if isinstance(expected, str):
        return expected in (data if isinstance(data, str) else _json(data))
    if isinstance(expected, Mapping):
        return isinstance(data, Mapping) and all(
            key in data and contains(data[key], value) for key, value in expected.items()
        )
    if isinstance(expected, list | tuple):
        return isinstance(data, list | tuple) and all(any(contains(d, e) for d in data) for e in expected)
    return same(data, expected)


def example_failure(example: Example, result: ToolResult) -> str | None:
    """Why *result* does not meet what *example* expects, or ``None`` when it does."""
    if example.expect_error is not None:
        if example.has_expect or example.expect_contains is not None:
            return "the example declares expect_error with expect or expect_contains: a call fails or succeeds"
        if result.success:
            return f"expected the call to fail, but it succeeded with {_shorten(_json(result.data))}"
        if example.expect_error not in (result.error or ""):
            return f"expected an error containing {example.expect_error!r}, got {_shorten(result.error or '')!r}"
        return None
    if not result.success:
        return f"the call failed: {_shorten(result.error or '')}"
    if example.has_expect and not same(result.data, example.expect):
        return f"expected {_shorten(_json(example.expect))}, got {_shorten(_json(result.data))}"
    if example.expect_contains is not None and not contains(result.data, example.expect_contains):
        return (
            f"expected data containing {_shorten(_json(example.expect_contains))}, got {_shorten(_json(result.data))}"
        )
    return None


# --- collecting -----------------------------------------------------------------------------


def collect_examples(specs: LoadResult, files: Iterable[str] | None = None) -> list[Case]:
    """A case per example that declares an expected outcome, of the tools of *files* (default: all).

    The tools of the files' MCP servers too: an example under ``overrides:`` runs against the
    tool the server lists (``toolflow test`` connects to the server, as ``call`` does).
    """
    wanted = None if files is None else {os.path.realpath(f) for f in files}
    cases: list[Case] = []
    for tool in specs.tools:
        if wanted is None or os.path.realpath(tool.file) in wanted:
            cases.extend(_example_cases(tool.name, tool.examples, tool.file, tool.locator))
    for spec_file in specs.files:
        if wanted is not None and os.path.realpath(spec_file.path) not in wanted:
            continue
        for server in spec_file.mcp_servers:
            for remote, override in server.overrides.items():
                if server.imports(remote):
                    examples = _remote_examples(server.pointer, remote, override)
                    name = server.local_name(remote)
                    cases.extend(_example_cases(name, examples, spec_file.path, spec_file.locator))
    return cases


def _example_cases(name: str, examples: Iterable[Example], file: str, locator: Locator | None) -> Iterator[Case]:
    """A case per example of tool *name* that declares an expected outcome, placed by *locator* in *file*."""
    for index, example in enumerate(examples):
        if example.is_test:
            span = locator.locate(example.pointer) if locator else None
            line, column = (span.line, span.column) if span else (1, 1)
            yield Case(
                kind="example",
                name=f"{name} examples[{index}]",
                file=file,
                line=line,
                column=column,
                tool_name=name,
                example=example,
            )


def _remote_examples(server: str, remote: str, override: Mapping[str, Any]) -> tuple[Example, ...]:
    """The examples an MCP server's entry declares for its tool *remote* under ``overrides:``."""
    pointer = json_pointer(["overrides", remote, "examples"])
    return tuple(Example.from_document(e, f"{server}{pointer}/{i}") for i, e in enumerate(override.get("examples", ())))


def find_test_files(paths: Iterable[str]) -> list[str]:
    """The test files of *paths*: each ``*.toolflow.yaml`` file, and those under each directory (sorted)."""
    found: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(TEST_SUFFIXES))
        elif path.endswith(TEST_SUFFIXES):
            found.append(path)
    return found


def _position(text: str, *keys: str | int) -> tuple[int, int]:
    """The 1-based line and column of the key (or list item) at *keys* in a test file's YAML (1, 1 if none)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return 1, 1
    mark = None
    for key in keys:
        if isinstance(key, int) and isinstance(node, yaml.SequenceNode) and key < len(node.value):
            node = node.value[key]
            mark = node.start_mark
            continue
        found = isinstance(node, yaml.MappingNode) and next(
            ((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None
        )
        if not found:
            break
        mark, node = found[0].start_mark, found[1]
    return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


def session_cases(path: str) -> list[Case]:
    """The cases of the test file *path*: its one session, or one per entry of its ``sessions`` list.

    A file that cannot be read or is malformed is one case carrying its ``problem``; so is a
    ``sessions`` entry that is malformed (the others run).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
        document = load_data(text)
    except (OSError, UnicodeDecodeError) as exc:
        return [Case(kind="session", name=path, file=path, problem=f"cannot read the test file: {exc}")]
    except DocumentError as exc:
        line, column = exc.line, exc.column
        return [Case(kind="session", name=path, file=path, line=line, column=column, problem=exc.message)]
    if isinstance(document, Mapping) and "sessions" in document:
        return _listed_sessions(path, text, document)
    line, column = _position(text, "expect")
    return [_checked(Case(kind="session", name=path, file=path, line=line, column=column), document)]


def session_case(path: str) -> Case:
    """The case of a test file that holds one session (the first of a ``sessions`` list)."""
    return session_cases(path)[0]


def _checked(case: Case, document: object) -> Case:
    trouble = _document_problem(document)
    if trouble is not None:
        return attrs.evolve(case, problem=trouble)
    assert isinstance(document, Mapping)  # _document_problem said so
    return attrs.evolve(case, document=document)


def _listed_sessions(path: str, text: str, document: Mapping[str, Any]) -> list[Case]:
    """A case per entry of ``sessions``; the file's ``specs``, ``format`` and ``approve`` are each entry's defaults."""
    line, column = _position(text, "sessions")
    whole = Case(kind="session", name=path, file=path, line=line, column=column)
    unknown = sorted(set(document) - SESSIONS_FILE_KEYS)
    entries = document["sessions"]
    if unknown:
        return [
            attrs.evolve(
                whole,
                problem=f"unknown keys {unknown} beside 'sessions'; expected {', '.join(sorted(SESSIONS_FILE_KEYS))}",
            )
        ]
    if not (isinstance(entries, list) and entries and all(isinstance(e, Mapping) for e in entries)):
        return [attrs.evolve(whole, problem="'sessions' must be a list of sessions, each a mapping with a 'name'")]
    names = [entry.get("name") for entry in entries]
    shared = {key: document[key] for key in ("specs", "format", "approve", "context") if key in document}
    cases = []
    for index, entry in enumerate(entries):
        name = entry.get("name")
        line, column = _position(text, "sessions", index, "expect")
        case = Case(kind="session", name=f"{path} sessions[{name}]", file=path, line=line, column=column)
        if not isinstance(name, str) or not name:
            cases.append(attrs.evolve(case, name=f"{path} sessions[{index}]", problem="each session needs a 'name'"))
        elif names.count(name) > 1:
            cases.append(attrs.evolve(case, problem=f"two sessions are named {name!r}"))
        else:
            own = {key: value for key, value in entry.items() if key != "name"}
            cases.append(_checked(case, {**shared, **own}))
    return cases


def _document_problem(document: object) -> str | None:
    """What is wrong with a test file's document, before anything runs (``None``: nothing)."""
    if not isinstance(document, Mapping):
        return "a test file is a mapping with a session ('turns', or 'session: FILE') and 'expect'"
    unknown = sorted(set(document) - TEST_KEYS)
    if unknown:
        return f"unknown keys {unknown}; expected {', '.join(sorted(TEST_KEYS))}"
    expect = _expect_problem(document.get("expect"))
    if expect is not None:
        return expect
    if ("session" in document) == ("turns" in document):
        return "give the session either inline ('turns', with 'system' and 'prompt') or as 'session: FILE'"
    if "session" in document and ("system" in document or "prompt" in document):
        return "'system' and 'prompt' belong in the session file named by 'session'"
    return _setting_problem(document)


def _setting_problem(document: Mapping[str, Any]) -> str | None:
    """What is wrong with a test file's settings (``approve``, ``context``, ``specs``), if anything."""
    if "approve" in document and not isinstance(document["approve"], bool):
        return "'approve' must be yes or no"
    if "context" in document and not isinstance(document["context"], Mapping):
        return "'context' must be a mapping: the caller's context the session runs under ({user: {id: u1}})"
    specs = document.get("specs")
    if specs is not None and not (isinstance(specs, list) and all(isinstance(s, str) for s in specs)):
        return "'specs' must be a list of spec files or directories, relative to the test file"
    return None


def _expect_problem(expect: object) -> str | None:
    """What is wrong with a test file's ``expect`` (``None``: nothing)."""
    if not isinstance(expect, Mapping) or not expect:
        return "'expect' must be a mapping of reason, tools, answer_contains, turns"
    unknown = sorted(set(expect) - EXPECT_KEYS)
    if unknown:
        return f"unknown keys {unknown} in 'expect'; expected {', '.join(sorted(EXPECT_KEYS))}"
    tools = expect.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, str) for t in tools)):
        return "'expect: tools' must be a list of tool names"
    return None


# --- running --------------------------------------------------------------------------------


@attrs.define
class _Runner:
    """Runs cases: opens each set of specs' registry once (their MCP servers connected), an engine per case."""

    plugins: Plugins
    approve: str | None
    directory: str
    stack: contextlib.AsyncExitStack
    """Holds the registries open (and the connections of their MCP servers) until the run ends."""
    _registries: dict[tuple[str, ...], tuple[Registry, Policy]] = attrs.field(factory=dict, init=False)

    async def registry(self, paths: Sequence[str], specs: LoadResult | None = None) -> tuple[Registry, Policy]:
        key = tuple(paths)
        if key not in self._registries:
            specs = specs if specs is not None else load_specs(paths, kinds=self.plugins.kind_schemas())
            registry = await self.stack.enter_async_context(open_registry(specs, plugins=self.plugins))
            self._registries[key] = (registry, Policy.from_specs(specs))
        return self._registries[key]

    def _cache_path(self) -> str:
        """A persistent cache file of its own for each case: no entry of another test, or of the project, is read."""
        return os.path.join(self.directory, f"cache-{time.monotonic_ns()}.sqlite3")

    async def example(self, case: Case, paths: Sequence[str]) -> Outcome:
        assert case.tool_name and case.example is not None  # noqa: PT018 - examples carry both
        registry, policy = await self.registry(paths)
        approve = _approver(self.approve)
        started = time.perf_counter()
        unruled = attrs.evolve(policy, rules=())  # an example is one call, not a conversation: no order rules
        async with open_engine(
            registry, plugins=self.plugins, policy=unruled, approve=approve, cache_path=self._cache_path()
        ) as engine:
            with providing_context(case.example.context):  # the example's own: fills bound parameters
                result = await engine.call(case.tool_name, dict(case.example.args), call_id="example")
        failure = example_failure(case.example, result)
        return Outcome(case=case, passed=failure is None, message=failure or "", duration=time.perf_counter() - started)

    async def session(self, case: Case, project_specs: Sequence[str]) -> Outcome:
        started = time.perf_counter()
        if case.document is None:
            return Outcome(case=case, passed=False, message=case.problem or "the test file cannot run")
        document = case.document
        base = os.path.dirname(case.file)
        paths = [os.path.join(base, p) for p in document["specs"]] if "specs" in document else list(project_specs)
        registry, policy = await self.registry(paths)
        if "session" in document:
            provider = open_scripted(os.path.join(base, str(document["session"])))
        else:
            transcript = {key: document[key] for key in _TRANSCRIPT_KEYS if key in document}
            provider = ScriptedProvider(case.file, transcript)
        mode = self.approve
        if "approve" in document:  # YAML reads `approve: yes` as true
            mode = "yes" if document["approve"] else "no"
        if not provider.prompt:
            return Outcome(case=case, passed=False, message="the session has no 'prompt' (the user's message)")
        async with open_engine(registry, plugins=self.plugins, cache_path=self._cache_path()) as engine:
            agent = Agent(
                engine,
                provider,
                policy=policy,
                format=str(document.get("format", "openai")),
                system=policy.system_prompt or provider.system,
                approve=_approver(mode),
                model="scripted",
                context=document.get("context"),
            )
            result = await agent.run(provider.prompt)
        failure = session_failure(document["expect"], result)
        return Outcome(case=case, passed=failure is None, message=failure or "", duration=time.perf_counter() - started)


def _approver(mode: str | None) -> Any:
    """The approver of ``yes`` or ``no``; ``None`` lets the plugins decide (a test never asks on the terminal)."""
    return None if mode is None else approver(mode, io.StringIO())


def _answer(result: LoopResult) -> str:
    """The loop's answer: the model's final text, and the data of each call that ended the loop."""
    parts = [result.final_answer]
    if result.reason == "terminal" and result.turns:
        last = result.turns[-1]
        parts.extend(
            entry.result.data if isinstance(entry.result.data, str) else _json(entry.result.data)
            for entry in last.entries
            if entry.call_id in last.ended_by
        )
    return "\n".join(part for part in parts if part)


def _called(result: LoopResult) -> list[str]:
    """The tool of every call the model made, in order (a malformed call as ``?``)."""
    return [
        entry.call.name if isinstance(entry.call, ToolCall) else entry.tool_name or "?"
        for turn in result.turns
        for entry in turn.entries
    ]


def session_failure(expect: Mapping[str, Any], result: LoopResult) -> str | None:
    """Why the loop's *result* does not meet a test file's *expect*, or ``None`` when it does."""
    problems = []
    reason = expect.get("reason")
    if reason is not None and reason != result.reason:
        problems.append(f"expected the loop to end with {reason!r}, it ended with {result.reason!r}")
    tools = expect.get("tools")
    if tools is not None and list(tools) != (called := _called(result)):
        problems.append(f"expected the calls {tools}, the model called {called}")
    turns = expect.get("turns")
    if turns is not None and turns != len(result.turns):
        problems.append(f"expected {turns} turns, the loop ran {len(result.turns)}")
    text = expect.get("answer_contains")
    if text is not None and str(text) not in (answer := _answer(result)):
        problems.append(f"expected the answer to contain {str(text)!r}, it is {_shorten(answer)!r}")
    return "; ".join(problems) or None


def run_cases(
    cases: Sequence[Case],
    plugins: Plugins,
    *,
    example_specs: Sequence[str],
    session_specs: Sequence[str],
    specs: LoadResult | None = None,
    approve: str | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
    stderr: TextIO | None = None,
) -> list[Outcome]:
    """Run *cases* in order in one ``trio.run``; an example's tool comes from *example_specs*.

    *specs* is the load of *example_specs* when the caller has it. A test file's session runs
    against its ``specs``, else *session_specs*. When the examples' specs do not build a registry
    (errors, an unbound implementation), the :class:`~toolflow.SpecError` or
    :class:`~toolflow.RegistryError` escapes before anything runs; a session whose specs do not
    build, or that is malformed, fails with the error's message; other exceptions escape. The
    engine's warnings go to *stderr* (default: dropped).
    """
    import trio  # noqa: PLC0415 - the engine's library, only once tests run

    outcomes: list[Outcome] = []

    async def main(directory: str) -> None:
        async with contextlib.AsyncExitStack() as stack:
            runner = _Runner(plugins=plugins, approve=approve, directory=directory, stack=stack)
            if any(case.kind == "example" for case in cases):
                await runner.registry(example_specs, specs)  # specs that do not build stop the run, once
            await run_all(runner)

    async def run_all(runner: _Runner) -> None:
        for case in cases:
            try:
                if case.kind == "example":
                    outcome = await runner.example(case, example_specs)
                else:
                    outcome = await runner.session(case, session_specs)
            except ToolflowError as exc:
                outcome = Outcome(case=case, passed=False, message=str(exc))
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
            await trio.lowlevel.checkpoint()

    with tempfile.TemporaryDirectory(prefix="toolflow-test-") as directory:
        run_trio(lambda: main(directory), stderr or io.StringIO())
    return outcomes


# --- the command ----------------------------------------------------------------------------


def _split_paths(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """The spec paths and the test-file paths of ``toolflow test``'s PATH arguments (or the defaults)."""
    from toolflow._project import load_project  # noqa: PLC0415

    if not paths:
        project = load_project()
        specs = spec_paths([])
        tests_dir = os.path.relpath(os.path.join(project.root, "tests"))
        return specs, list(dict.fromkeys(find_test_files([*specs, tests_dir])))
    missing = [path for path in paths if not os.path.exists(path)]
    if missing:
        msg = f"test: no such file or directory: {missing[0]!r}"
        raise UsageError(msg)
    specs = [p for p in paths if os.path.isdir(p) or (p.endswith(SPEC_SUFFIXES) and not p.endswith(TEST_SUFFIXES))]
    return specs, find_test_files(paths)


def _has_spec_files(paths: Sequence[str]) -> bool:
    from toolflow._loader import iter_spec_paths  # noqa: PLC0415

    return any(True for _ in iter_spec_paths(paths))


def command(args: argparse.Namespace, plugins: Plugins, stdout: TextIO, stderr: TextIO) -> int:
    """Run ``toolflow test`` with parsed *args*: 0 when every test passed, 1 when one failed."""
    example_paths, test_files = _split_paths(args.paths)
    session_specs = spec_paths([])
    example_paths = [p for p in example_paths if _has_spec_files([p])]
    specs = load_specs(example_paths, kinds=plugins.kind_schemas()) if example_paths else None
    if specs is not None and not specs.ok:
        raise SpecError(specs.diagnostics)  # as `toolflow call` does: `toolflow lint` says more
    cases = collect_examples(specs) if specs is not None else []
    cases.extend(case for path in test_files for case in session_cases(path))
    if not cases:
        print(
            "toolflow: warning: no tests found (examples with expect, expect_contains or expect_error, "
            "or *.toolflow.yaml test files)",
            file=stderr,
        )
        return 0
    stream = stdout if args.output_format == "text" else None
    started = time.perf_counter()
    outcomes = run_cases(
        cases,
        plugins,
        example_specs=example_paths,
        session_specs=session_specs,
        specs=specs,
        approve=args.approve,
        on_outcome=_progress(stream) if stream is not None else None,
        stderr=stderr,
    )
    stdout.write(render(outcomes, args.output_format, elapsed=time.perf_counter() - started))
    return 0 if all(outcome.passed for outcome in outcomes) else 1


def _progress(stdout: TextIO) -> Callable[[Outcome], None]:
    """The text format's line per test, written as each test ends."""

    def show(outcome: Outcome) -> None:
        stdout.write(outcome_line(outcome))
        stdout.flush()

    return show
