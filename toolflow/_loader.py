"""Load spec files and directories into model records plus diagnostics.

Loading never raises on bad input: an unreadable file, binary data, an empty
file, a YAML syntax error or a value of the wrong type each become a
:class:`~toolflow.Diagnostic` with file, line and column. :func:`load_specs`
returns everything in a :class:`~toolflow.LoadResult`; :func:`validate_specs`
is the one wrapper that raises when there are errors.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import os
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
from yaml.nodes import Node

from toolflow import _yaml
from toolflow._diagnostics import Diagnostic, Severity
from toolflow._errors import SpecError, expect, expect_names
from toolflow._model import (
    NO_RETRY,
    CachePolicy,
    CacheScope,
    Category,
    Example,
    Implementation,
    LoadResult,
    McpServer,
    ParameterRule,
    Pipeline,
    PipelineStep,
    RateLimit,
    RetryPolicy,
    SpecFile,
    ToolDependency,
    Toolset,
    ToolSpec,
    parse_duration,
)
from toolflow._provenance import Interpolated, Redactor, iter_interpolated, plain
from toolflow._schemas import did_you_mean, iter_spec_problems, json_pointer

__all__ = [
    "IMPLEMENTATION_KINDS",
    "MAX_FILE_BYTES",
    "Includes",
    "empty_directory",
    "gc_paused",
    "iter_spec_paths",
    "iter_spec_sources",
    "load_file",
    "load_specs",
    "missing_file",
    "redacted",
    "validate_specs",
]

MAX_FILE_BYTES = 10 * 1024 * 1024
"""Spec files larger than this are refused (TF005)."""

IMPLEMENTATION_KINDS = ("implementation", "template", "command", "pipeline")
"""The tool keys that say how a tool is implemented; a tool has exactly one."""

SPEC_SUFFIXES = (".yaml", ".yml")

TEST_SUFFIXES = (".toolflow.yaml", ".toolflow.yml")
"""Test files of ``toolflow test``: a directory of specs may hold them, and they are not specs."""

_WARNING_CODES = frozenset({"TF006", "TF007", "TF008"})
_RULE_FORMS = ("require", "exclusive", "at_least_one", "exactly_one")
_DEFAULT_KEYS = ("timeout", "retry", "cache", "strict")
"""The keys of ``defaults:``; an MCP server's own merge over the file's key by key (``_merged``)."""


def iter_spec_paths(paths: Iterable[str | os.PathLike[str]]) -> Iterator[tuple[str, bool]]:
    """Yield ``(path, exists)`` for each spec file named by *paths*.

    A directory contributes its ``*.yaml`` and ``*.yml`` files, recursively and
    sorted, skipping hidden entries and test files (``*.toolflow.yaml``). A file is
    yielded as given, whatever its suffix. A path that does not exist is yielded
    with ``exists=False``.
    """
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found: list[str] = []
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found.extend(
                    os.path.join(root, f)
                    for f in files
                    if f.endswith(SPEC_SUFFIXES) and not f.endswith(TEST_SUFFIXES) and not f.startswith(".")
                )
            yield from ((p, True) for p in sorted(found))
        else:
            yield os.fspath(raw), path.exists()


def iter_spec_sources(paths: Iterable[str | os.PathLike[str]]) -> Iterator[tuple[str, Diagnostic | None]]:
    """Yield ``(path, problem)`` for each spec file named by *paths*, as :func:`iter_spec_paths` finds them.

    *problem* is None for a file to load; a path that does not exist comes with its TF005, and a
    directory that holds no spec file with a TF008 warning (rather than nothing: a lint of no file
    is no success).
    """
    for raw in paths:
        found = False
        for path, exists in iter_spec_paths([raw]):
            found = True
            yield path, None if exists else missing_file(path)
        if not found:
            yield os.fspath(raw), empty_directory(os.fspath(raw))


def load_specs(
    paths: Iterable[str | os.PathLike[str]],
    *,
    environ: Mapping[str, str] | None = None,
    kinds: Mapping[str, Mapping[str, Any]] | None = None,
    packs: Mapping[str, Sequence[str]] | None = None,
) -> LoadResult:
    """Load every spec file named by *paths* (files or directories), and the tool packs they include.

    Args:
        paths: Spec files and directories.
        environ: Variables for ``${VAR}`` interpolation (default: ``os.environ``).
        kinds: Implementation kinds added by plugins: spec key to the JSON Schema of its value.
        packs: Tool packs of plugins: name to its spec files (``Plugins.loader_options()`` gives
            both); a file's ``include:`` loads a pack's files once, after the files of *paths*.

    Returns:
        The files, their tools, and every diagnostic of the load, sorted by position.

    Raises:
        TypeError: *paths* is a single path rather than a list of them (whose characters would
            be read as paths), or *environ* or *kinds* is not a mapping.
    """
    expect_names(paths, "paths", what="spec files and directories")
    expect(environ, (Mapping, type(None)), "environ", "a mapping of variable names to values, or None")
    expect(kinds, (Mapping, type(None)), "kinds", "a mapping of spec keys to JSON Schemas, or None")
    files: list[SpecFile] = []
    diagnostics: list[Diagnostic] = []
    includes = Includes(packs)
    for path, problem in includes.following(iter_spec_sources(paths)):
        if problem is not None:
            diagnostics.append(problem)
            continue
        spec_file, found = load_file(path, environ=environ, kinds=kinds, packs=packs)
        includes.note(spec_file)
        files.append(spec_file)
        diagnostics.extend(found)
    return LoadResult(files=tuple(files), diagnostics=tuple(sorted(diagnostics, key=Diagnostic.sort_key)))


class Includes:
    """The tool packs a load has to add: each included pack's files, once, after the files given.

    ``following(sources)`` yields the given ``(path, problem)`` pairs, then every file of the packs
    that the files :meth:`note` saw include (and those the packs' own files include), each once.
    """

    def __init__(self, packs: Mapping[str, Sequence[str]] | None) -> None:
        self._packs = packs or {}
        self._seen: set[str] = set()
        self._queue: collections.deque[str] = collections.deque()

    def note(self, spec_file: SpecFile) -> None:
        """Queue the files of the packs *spec_file* includes that are not loaded yet."""
        for name in spec_file.includes:
            for path in self._packs.get(name, ()):
                if path not in self._seen:
                    self._seen.add(path)
                    self._queue.append(path)

    def following(self, given: Iterable[tuple[str, Diagnostic | None]]) -> Iterator[tuple[str, Diagnostic | None]]:
        """*given* (``(path, problem)`` pairs of :func:`iter_spec_sources`), then the included packs' files."""
        for path, problem in given:
            self._seen.add(path)
            yield path, problem
        while self._queue:
            yield self._queue.popleft(), None


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while one file is loaded.

    Composing and converting a file makes a node tree of many small acyclic objects that die,
    freed by their reference counts, when the file's load returns; collector passes meanwhile
    would only walk them, and promote them to older generations whose passes walk them again.
    What a load keeps (records, positions) is small, and is the collector's again at once.
    Nested pauses are fine: only the outermost one turns the collector back on.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def validate_specs(paths: Iterable[str | os.PathLike[str]], *, environ: Mapping[str, str] | None = None) -> LoadResult:
    """Load like :func:`load_specs`, raising when any diagnostic is an error.

    Raises:
        SpecError: The load produced error diagnostics; they are on the exception.
    """
    result = load_specs(paths, environ=environ)
    if not result.ok:
        raise SpecError(result.diagnostics)
    return result


def missing_file(path: str) -> Diagnostic:
    """The diagnostic of a spec path that does not exist (TF005)."""
    return _file_diag(path, "TF005", f"no such file or directory: {path!r}")


def empty_directory(path: str) -> Diagnostic:
    """The diagnostic of a spec directory without a spec file (TF008)."""
    return _file_diag(path, "TF008", f"no spec files (*.yaml, *.yml) in directory {path!r}")


def _file_diag(path: str, code: str, message: str, line: int = 1, column: int = 1) -> Diagnostic:
    severity = Severity.WARNING if code in _WARNING_CODES else Severity.ERROR
    return Diagnostic(
        code=code,
        message=message,
        file=path,
        line=line,
        column=column,
        end_line=line,
        end_column=column,
        severity=severity,
    )


def load_file(
    path: str,
    *,
    environ: Mapping[str, str] | None = None,
    kinds: Mapping[str, Mapping[str, Any]] | None = None,
    packs: Mapping[str, Sequence[str]] | None = None,
) -> tuple[SpecFile, list[Diagnostic]]:
    """Load one spec file; return it (``ok=False`` when unusable) and its diagnostics.

    An ``include:`` of a pack that *packs* does not have is TF106 (the file's ``includes`` lists
    the packs that exist); loading the packs' files is :func:`load_specs`' (see :class:`Includes`).
    """
    with gc_paused():
        return _load_file(path, environ=environ, kinds=kinds, packs=packs)


def _load_file(
    path: str,
    *,
    environ: Mapping[str, str] | None,
    kinds: Mapping[str, Mapping[str, Any]] | None,
    packs: Mapping[str, Sequence[str]] | None = None,
) -> tuple[SpecFile, list[Diagnostic]]:
    text_or_diag = _read_text(path)
    if isinstance(text_or_diag, Diagnostic):
        return SpecFile(path=path, ok=False), [text_or_diag]
    text = text_or_diag
    try:
        root = _yaml.compose(text)
    except _yaml.DocumentError as problem:
        return SpecFile(path=path, ok=False, text=text), [
            _file_diag(path, problem.code, problem.message, problem.line, problem.column)
        ]
    if root is None:
        return SpecFile(path=path, text=text, locator=_yaml.NodeLocator(None, text)), [
            _file_diag(path, "TF006", "the file is empty; a spec file starts with 'toolflow: 1'")
        ]
    diagnostics: list[Diagnostic] = []
    end: tuple[int, int] | None = None

    # Not through the locator: convert()'s closures keep this function until the collector
    # frees them, and it must not keep the node tree alive meanwhile.
    def report(code: str, message: str, node: Node, *, at_key: bool = False) -> None:
        nonlocal end
        if end is None:
            end = _yaml.position_of(text, len(text))
        span = _yaml.span_within(node, end)
        diagnostics.append(
            Diagnostic(
                code=code,
                message=message.replace("tag:yaml.org,2002:", "!!"),
                file=path,
                line=span.line,
                column=span.column,
                end_line=span.end_line,
                end_column=span.end_column,
                severity=Severity.WARNING if code in _WARNING_CODES else Severity.ERROR,
            )
        )

    marks: set[int] = set()
    try:
        data, positions = _yaml.convert(root, report, environ=environ, marks=marks)
    except _yaml.DocumentError as problem:
        diagnostics.append(_file_diag(path, problem.code, problem.message, problem.line, problem.column))
        return SpecFile(path=path, ok=False, text=text, locator=_yaml.NodeLocator(None, text)), diagnostics
    locator = _yaml.NodeLocator(positions, text)
    interpolated = tuple(iter_interpolated(data, within=marks)) if marks else ()
    builder = _Builder(
        path,
        data,
        text,
        locator,
        diagnostics,
        kinds=kinds or {},
        packs=packs or {},
        interpolated=interpolated,
        exact=plain(data, within=marks) if marks else data,
    )
    return builder.build(), redacted(diagnostics, interpolated)


def redacted(diagnostics: Iterable[Diagnostic], interpolated: Iterable[tuple[str, Interpolated]]) -> list[Diagnostic]:
    """*diagnostics* with the values of *interpolated* strings replaced by their references in the messages.

    Messages name values with ``!r``, which shows the reference already; this catches text built
    from a value some other way (see ``toolflow._provenance.Redactor``).
    """
    redact = Redactor(string for _, string in interpolated)
    if not redact:
        return list(diagnostics)
    return [d if (message := redact(d.message)) == d.message else attrs.evolve(d, message=message) for d in diagnostics]


def _position(raw: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in characters, with YAML's line breaks, like its marks) of byte *offset*."""
    prefix = raw[:offset].decode("utf-8", errors="replace").removeprefix("\ufeff")
    return _yaml.position_of(prefix, len(prefix))


def _read_text(path: str) -> str | Diagnostic:
    try:
        # O_NONBLOCK: opening a FIFO named like a spec must not wait for a writer.
        with open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                return _file_diag(path, "TF005", "not a regular file (a directory, FIFO or device)")
            raw = stream.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        return _file_diag(path, "TF005", f"cannot read the file: {exc.strerror or exc}")
    if len(raw) > MAX_FILE_BYTES:
        return _file_diag(path, "TF005", f"the file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    if (nul := raw.find(b"\x00")) >= 0:
        line, column = _position(raw, nul)
        return _file_diag(path, "TF005", "the file is binary data, not YAML text (NUL byte)", line, column)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, column = _position(raw, exc.start)
        return _file_diag(path, "TF005", f"the file is not UTF-8 text (byte 0x{raw[exc.start]:02x})", line, column)


class _Builder:
    """Builds model records from a converted document, once it has been checked against the schema."""

    def __init__(
        self,
        path: str,
        data: Any,
        text: str,
        locator: _yaml.NodeLocator,
        out: list[Diagnostic],
        *,
        kinds: Mapping[str, Mapping[str, Any]],
        packs: Mapping[str, Sequence[str]],
        interpolated: tuple[tuple[str, Interpolated], ...],
        exact: Any,
    ) -> None:
        self.path, self.data, self.text, self.locator, self.out = path, data, text, locator, out
        self.kinds = kinds
        self.packs = packs
        self.interpolated = interpolated
        self.exact = exact  # data with plain strings, for jsonschema_rs
        self.kind_keys = (*IMPLEMENTATION_KINDS, *(k for k in kinds if k not in IMPLEMENTATION_KINDS))

    def diag(self, code: str, message: str, pointer: str, *, key: bool = False) -> None:
        self.out.append(Diagnostic.at(self.locator, pointer, code=code, message=message, file=self.path, key=key))

    def schema_problems(self) -> tuple[set[str], set[str], set[str]]:
        """Report the schema's problems; return the tools, servers and other sections they are in."""
        bad: dict[str, set[str]] = {"tools": set(), "mcp_servers": set(), "": set()}
        for problem in iter_spec_problems(self.data, self.kinds, exact=self.exact):
            self.diag(problem.code, problem.message, problem.pointer, key=problem.key)
            parts = problem.pointer.split("/")
            if len(parts) >= 3 and parts[1] in bad:
                bad[parts[1]].add(parts[2].replace("~1", "/").replace("~0", "~"))
            else:
                bad[""].add(parts[1] if len(parts) > 1 else "")
        return bad["tools"], bad["mcp_servers"], bad[""]

    def build(self) -> SpecFile:
        bad_tools, bad_servers, bad_sections = self.schema_problems()
        data = self.data
        if not isinstance(data, dict) or "" in bad_sections or "tools" in bad_sections:
            return SpecFile(
                path=self.path,
                ok=False,
                data=data,
                text=self.text,
                locator=self.locator,
                interpolated=self.interpolated,
            )
        defaults = data.get("defaults", {}) if "defaults" not in bad_sections else {}
        tools = self.tools(data.get("tools") or {}, defaults, bad_tools)
        toolsets = () if "toolsets" in bad_sections else tuple(self.toolsets(data.get("toolsets") or {}))
        servers = (
            []
            if "mcp_servers" in bad_sections
            else self.mcp_servers(data.get("mcp_servers") or {}, defaults, bad_servers)
        )
        return SpecFile(
            path=self.path,
            version=data.get("toolflow"),
            tools=tuple(tools),
            toolsets=toolsets,
            policy=data.get("policy"),
            includes=() if "include" in bad_sections else self.includes(data.get("include") or ()),
            mcp_servers=tuple(servers),
            data=data,
            text=self.text,
            locator=self.locator,
            interpolated=self.interpolated,
        )

    def tools(self, section: dict[str, Any], defaults: dict[str, Any], bad: set[str]) -> list[ToolSpec]:
        """The well-formed tools of *section* (those not in *bad*); TF104 for a value the model refuses."""
        tools = []
        for name, body in section.items():
            if name in bad:
                continue
            try:
                tools.append(self.tool(name, body, defaults))
            except ValueError as exc:  # a value the schema admits but the model refuses
                self.diag("TF104", f"tool {name!r}: {exc}", json_pointer(["tools", name]), key=True)
        return tools

    def mcp_servers(self, section: dict[str, Any], defaults: dict[str, Any], bad: set[str]) -> list[McpServer]:
        """The well-formed servers of *section* (not in *bad*), their ``defaults`` over the file's ones.

        The schema cannot say "exactly one of ``command`` and ``url``", nor which keys go with
        which (TF102, TF104); and each entry of ``overrides`` must build a tool as
        ``remote_tool_spec`` will (TF104).
        """
        servers = []
        for name, body in section.items():
            if name in bad:
                continue
            pointer = json_pointer(["mcp_servers", name])
            self.transport_problems(name, body, pointer)
            merged = {key: _merged(defaults.get(key), body.get("defaults", {}).get(key)) for key in _DEFAULT_KEYS}
            merged = {key: value for key, value in merged.items() if value is not None}
            for remote, keys in body.get("overrides", {}).items():
                where = f"{pointer}/overrides{json_pointer([remote])}"
                self.parameter_rules(keys.get("parameter_rules", []), where)
                try:  # as remote_tool_spec builds it, with the rules just checked left out
                    self.tool(remote, {k: v for k, v in keys.items() if k != "parameter_rules"}, merged)
                except ValueError as exc:
                    self.diag("TF104", f"override of {remote!r} of MCP server {name!r}: {exc}", where, key=True)
            servers.append(
                McpServer(
                    name=name,
                    command=tuple(body.get("command", ())),
                    url=body.get("url", ""),
                    env=dict(body.get("env", {})),
                    cwd=body.get("cwd", ""),
                    headers=dict(body.get("headers", {})),
                    tools=tuple(body["tools"]) if "tools" in body else None,
                    prefix=body.get("prefix", ""),
                    defaults=merged,
                    overrides={remote: dict(keys) for remote, keys in body.get("overrides", {}).items()},
                    trust_annotations=body.get("trust_annotations", False),
                    file=self.path,
                    pointer=pointer,
                )
            )
        return servers

    def transport_problems(self, name: str, body: dict[str, Any], pointer: str) -> None:
        """TF102 without ``command`` or ``url``, TF104 with both or with a key of the other transport."""
        if ("command" in body) == ("url" in body):
            if "command" in body:
                problem, code, pointer = (
                    f"MCP server {name!r} has both 'command' and 'url'; keep one",
                    "TF104",
                    f"{pointer}/url",
                )
            else:
                problem, code = (
                    f"MCP server {name!r} needs 'command' (a program speaking MCP over stdio) or 'url'",
                    "TF102",
                )
            self.diag(code, problem, pointer, key=True)
            return
        foreign = ("headers",) if "command" in body else ("env", "cwd")
        for key in (k for k in foreign if k in body):
            transport = "'url' (it is sent over HTTP)" if key == "headers" else "'command' (it is the subprocess's)"
            self.diag("TF104", f"{key!r} of MCP server {name!r} goes with {transport}", f"{pointer}/{key}", key=True)

    def includes(self, names: Sequence[str]) -> tuple[str, ...]:
        """The packs of ``include:`` that plugins provide; TF106 for the others."""
        found = []
        for index, name in enumerate(names):
            files = self.packs.get(name)
            if files:
                found.append(name)
                continue
            if files is not None:  # registered by two plugins (Plugins.loader_options gives no files)
                problem = f"tool pack {name!r} is registered by more than one plugin; uninstall or disable one"
            else:
                known = sorted(self.packs)
                listed = ", ".join(repr(pack) for pack in known) if known else "none"
                problem = (
                    f"no plugin provides tool pack {name!r}{did_you_mean(name, known)} (installed packs: {listed})"
                )
            self.diag("TF106", problem, f"/include/{index}")
        return tuple(dict.fromkeys(found))

    def toolsets(self, section: dict[str, Any]) -> Iterator[Toolset]:
        for name, body in section.items():
            yield Toolset(
                name=name,
                description=body.get("description", ""),
                tools=tuple(body.get("tools", ())),
                categories=tuple(body.get("categories", ())),
                exclude=tuple(body.get("exclude", ())),
                file=self.path,
                pointer=json_pointer(["toolsets", name]),
            )

    def tool(self, name: str, body: dict[str, Any], defaults: dict[str, Any]) -> ToolSpec:
        pointer = json_pointer(["tools", name])
        category = body.get("category", Category.SAFE_CHAIN.value)
        idempotent = bool(body.get("idempotent", False))
        return ToolSpec(
            name=name,
            description=body.get("description", ""),
            title=body.get("title", ""),
            category=category,
            parameters=body.get("parameters", {"type": "object"}),
            output_schema=body.get("output_schema"),
            timeout=parse_duration(body.get("timeout", defaults.get("timeout", 30))),
            retry=_retry(
                defaults.get("retry"), body.get("retry"), dangerous=category == "dangerous" and not idempotent
            ),
            idempotent=idempotent,
            strict=bool(body.get("strict", defaults.get("strict", False))),
            concurrency=_concurrency(body.get("concurrency")),
            concurrency_on_outage=_concurrency_outage(body.get("concurrency")),
            rate_limit=_rate_limit(body.get("rate_limit")),
            cache=_cache(defaults.get("cache"), body.get("cache")),
            parameter_rules=self.parameter_rules(body.get("parameter_rules", []), pointer),
            depends_on=tuple(
                _dependency(d, f"{pointer}/depends_on/{i}") for i, d in enumerate(body.get("depends_on", []))
            ),
            examples=tuple(
                Example.from_document(e, f"{pointer}/examples/{i}") for i, e in enumerate(body.get("examples", []))
            ),
            implementations=tuple(
                Implementation(
                    kind=kind,
                    config=_implementation_config(kind, body[kind], f"{pointer}/{kind}"),
                    pointer=f"{pointer}/{kind}",
                )
                for kind in self.kind_keys
                if kind in body
            ),
            expose=bool(body.get("expose", True)),
            approval=body.get("approval"),
            deferred=bool(body.get("deferred", False)),
            context=dict(body.get("context", {})),
            file=self.path,
            pointer=pointer,
            locator=self.locator,
            interpolated=tuple(i for i in self.interpolated if i[0].startswith(f"{pointer}/"))
            if self.interpolated
            else (),
        )

    def parameter_rules(self, items: list[dict[str, Any]], tool_pointer: str) -> tuple[ParameterRule, ...]:
        """Build the well-formed rules; report the others (TF104)."""
        rules = []
        for i, item in enumerate(items):
            pointer = f"{tool_pointer}/parameter_rules/{i}"
            forms = [f for f in _RULE_FORMS if f in item]
            if len(forms) != 1:
                found = ", ".join(repr(f) for f in forms) or "none"
                self.diag(
                    "TF104",
                    "a parameter rule needs exactly one of 'require' (with 'when'), 'exclusive', "
                    f"'at_least_one', 'exactly_one'; found {found}",
                    pointer,
                )
                continue
            form = forms[0]
            if form == "require" and "when" not in item:
                self.diag("TF104", "'require' needs 'when': the parameter (or values) that trigger it", pointer)
                continue
            if form != "require" and "when" in item:
                self.diag("TF104", f"'when' goes with 'require', not with {form!r}", pointer)
                continue
            when = item.get("when")
            rules.append(
                ParameterRule(
                    kind="requires" if form == "require" else form,  # type: ignore[arg-type]
                    params=tuple(item[form]),
                    when=when if isinstance(when, str) else None,
                    when_values=when if isinstance(when, dict) else None,
                    pointer=pointer,
                )
            )
        return tuple(rules)


def _merged(default: Any, own: Any) -> Any:
    """Merge a default and a tool's own value of ``retry`` or ``cache`` key by key.

    ``true`` on the tool means "on, as the file's defaults say" when the defaults are a mapping.
    """
    if own is None or (own is True and isinstance(default, dict)):
        return default
    if isinstance(own, dict) and isinstance(default, dict):
        return {**default, **own}
    return own


def _retry(default: Any, own: Any, *, dangerous: bool) -> RetryPolicy:
    merged = _merged(default, own)
    if merged is False:
        return NO_RETRY
    settings = merged if isinstance(merged, dict) else {}
    asked = own is True or merged is True or "attempts" in settings
    if dangerous and not asked:
        # A dangerous tool that is not idempotent is retried only when a spec asks for it:
        # "retry: true", or a number of attempts.
        return NO_RETRY
    return RetryPolicy(
        attempts=settings.get("attempts", RetryPolicy().attempts),
        initial=parse_duration(settings.get("initial", 1)),
        max=parse_duration(settings.get("max", 10)),
        multiplier=float(settings.get("multiplier", 2.0)),
        jitter=bool(settings.get("jitter", True)),
        on=tuple(settings.get("on", RetryPolicy().on)),
    )


def _concurrency(setting: int | dict[str, Any] | None) -> int | None:
    """A tool's ``concurrency:`` limit: the number, or the ``limit`` of its object form (checked by the schema)."""
    return setting["limit"] if isinstance(setting, dict) else setting


def _concurrency_outage(setting: int | dict[str, Any] | None) -> Literal["open", "closed"]:
    return setting.get("on_outage", "open") if isinstance(setting, dict) else "open"


def _rate_limit(settings: dict[str, Any] | None) -> RateLimit | None:
    """The ``rate_limit:`` of a tool (its forms already checked by the schema)."""
    if settings is None:
        return None
    return RateLimit(
        calls=settings["calls"], per=parse_duration(settings["per"]), on_outage=settings.get("on_outage", "closed")
    )


def _cache(default: Any, own: Any) -> CachePolicy | None:
    merged = _merged(default, own)
    if merged is None or merged is False:
        return None
    settings = merged if isinstance(merged, dict) else {}
    ttl = settings.get("ttl")
    return CachePolicy(
        scope=CacheScope(settings.get("scope", CacheScope.SESSION.value)),
        ttl=None if ttl is None else parse_duration(ttl),
    )


def _dependency(item: Any, pointer: str) -> ToolDependency:
    if isinstance(item, str):
        return ToolDependency(tool=item, pointer=pointer)
    return ToolDependency(tool=item["tool"], scope=item.get("scope", "loop"), pointer=pointer)


def _implementation_config(kind: str, value: Any, pointer: str) -> Any:
    if kind == "pipeline":
        return _pipeline(value, pointer)
    if kind == "template":
        settings = value if isinstance(value, dict) else {"source": value}
        return {
            "source": settings["source"],
            "env": list(settings.get("env", [])),
            "output": settings.get("output", "text"),
        }
    if kind == "command":
        settings = value if isinstance(value, dict) else {"argv": value}
        return {
            "argv": list(settings["argv"]),
            "cwd": settings.get("cwd"),
            "env": dict(settings.get("env", {})),
            "max_output": settings.get("max_output", 65536),
            "output": settings.get("output", "text"),
            "success_codes": list(settings.get("success_codes", [0])),
        }
    return value


def _pipeline(value: dict[str, Any], pointer: str) -> Pipeline:
    """The ``pipeline:`` of a tool, as the spec schema admits it."""
    steps = tuple(
        PipelineStep(
            name=name,
            tool=step["tool"],
            arguments=step.get("with", {}),
            when=step.get("when"),
            for_each=step.get("for_each"),
            item_name=step.get("as", "item"),
            concurrency=step.get("concurrency"),
            needs=tuple(step.get("needs", ())),
            on_error=step.get("on_error", "stop"),
            pointer=f"{pointer}/steps{json_pointer([name])}",
        )
        for name, step in value["steps"].items()
    )
    return Pipeline(steps=steps, result=value.get("result"), has_result="result" in value, pointer=pointer)
