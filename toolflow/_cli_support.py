"""What the subcommands that read specs or run tools share: a few options, and their helpers.

:mod:`toolflow._cli` (the parser and the light subcommands), :mod:`toolflow._cli_call`
(``toolflow call``) and :mod:`toolflow._cli_run` (``toolflow run``) import from here, and this
module imports none of them, so the three import one way. Everything heavy (trio, the project
file, the cache) is imported inside the function that needs it: ``toolflow lint`` imports this
module and must still never import trio.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from toolflow._json import decode_problem

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from toolflow._calls import ToolCall
    from toolflow._model import LoadResult, ToolSpec
    from toolflow._plugins import Plugins
    from toolflow._policy import Policy
    from toolflow._registry import Registry

__all__ = [
    "add_cap_options",
    "add_output_format",
    "approver",
    "current_spellings",
    "deprecated_spellings",
    "open_tools",
    "project_cache_settings",
    "registry_to_read",
    "remote_tools",
    "run_trio",
    "shown_in_traces",
    "shutdown_grace",
    "spec_paths",
    "with_caps",
]

_T = TypeVar("_T")

_DEPRECATED = "deprecated_spellings"
"""The attribute of the parsed arguments that collects the old spellings used (see ``_OldSpelling``)."""


class _OldSpelling(argparse.Action):
    """An old spelling of ``--output-format`` (``--json``, ``--output FORMAT``), kept for one release.

    It sets ``output_format`` as the new option would, and notes itself, so that the command can say
    on standard error which spelling replaces it (``deprecated_spellings``).
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,  # noqa: ARG002 - the signature argparse calls
        namespace: argparse.Namespace,
        values: Any,
        option: str | None = None,
    ) -> None:
        value = self.const if self.nargs == 0 else values
        namespace.output_format = value
        noted = getattr(namespace, _DEPRECATED, [])
        noted.append(
            f"{option}{'' if self.nargs == 0 else ' ' + value} is deprecated and will be removed in the next "
            f"release; use --output-format {value}"
        )
        setattr(namespace, _DEPRECATED, noted)


def add_cap_options(parser: argparse.ArgumentParser, *, result_chars: bool = True) -> None:
    """Add ``--max-argument-bytes`` and (with *result_chars*) ``--max-result-chars``: the policy's caps, overridden.

    A value that is not a positive integer is a usage error (exit 2).
    """
    if result_chars:
        parser.add_argument(
            "--max-result-chars",
            type=positive_count,
            metavar="N",
            help="the longest result text the model is shown, in characters (overrides the policy's max_result_chars)",
        )
    parser.add_argument(
        "--max-argument-bytes",
        type=positive_count,
        metavar="N",
        help="the largest JSON of a call's arguments, in bytes; a larger call is refused and never runs "
        "(overrides the policy's max_argument_bytes)",
    )


def add_context_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--context JSON``: the caller's context, which fills the parameters tools bind under ``context:``.

    A value that is not a JSON object is a usage error (exit 2).
    """
    parser.add_argument(
        "--context",
        type=_context_json,
        metavar="JSON",
        help='the caller\'s context, a JSON object (e.g. \'{"user": {"id": "u1"}}\'): fills the parameters '
        "tools bind under 'context:', which the model never sets",
    )


def _context_json(text: str) -> dict[str, Any]:
    """``--context``'s value: a JSON object."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:  # a number too long for Python, nesting past its recursion
        msg = f"not valid JSON: {decode_problem(exc)}"
        raise argparse.ArgumentTypeError(msg) from None
    if not isinstance(value, dict):
        msg = f"expected a JSON object, got {type(value).__name__}"
        raise argparse.ArgumentTypeError(msg)
    return value


def positive_count(text: str) -> int:
    """A cap's value: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        msg = f"expected a whole number of at least 1, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def with_caps(policy: Policy, args: argparse.Namespace) -> Policy:
    """*policy* with the caps that ``--max-result-chars`` and ``--max-argument-bytes`` give instead of its own."""
    import attrs  # noqa: PLC0415 - `toolflow --help` must not import it (tests/cli/test_cli_subprocess.py)

    changes = {
        key: value
        for key in ("max_result_chars", "max_argument_bytes")
        if (value := getattr(args, key, None)) is not None
    }
    return attrs.evolve(policy, **changes) if changes else policy


def add_output_format(
    parser: argparse.ArgumentParser, choices: Sequence[str], *, what: str, old: str | None = None
) -> None:
    """Add ``--output-format`` (the first of *choices* is the default), the one spelling of machine output.

    Args:
        parser: A subcommand's parser.
        choices: The formats; the first is the default.
        what: The help text's description of the choices.
        old: The option this command used before (``--json`` or ``--output``), kept as a deprecated alias.
    """
    parser.add_argument("--output-format", choices=choices, default=choices[0], help=f"{what} (default: {choices[0]})")
    if old == "--json":
        parser.add_argument(
            "--json",
            action=_OldSpelling,
            nargs=0,
            const="json",
            default=argparse.SUPPRESS,
            help="deprecated: use --output-format json",
        )
    elif old is not None:
        parser.add_argument(
            old, action=_OldSpelling, choices=choices, default=argparse.SUPPRESS, help="deprecated: use --output-format"
        )


def current_spellings(matches: list[_T]) -> list[_T]:
    """The options an abbreviation matches (argparse's tuples, the action first), less the deprecated spellings.

    ``run --out`` matches ``--output-format`` and its old spelling ``--output``, which mean the same:
    it is ``--output-format``, not an ambiguous option. An old spelling still matches on its own.
    """
    current = [match for match in matches if not isinstance(match[0], _OldSpelling)]  # type: ignore[index]
    return current or matches


def deprecated_spellings(args: argparse.Namespace) -> list[str]:
    """The notes of the deprecated options that the command line *args* used, in order."""
    return list(getattr(args, _DEPRECATED, ()))


def shown_in_traces(specs: Iterable[ToolSpec]) -> Callable[[Any], Any]:
    """How a trace shows text or JSON-like data built from the *specs*' values (a pipeline step's arguments).

    A string that came from ``${...}`` shows its reference; in any other string, the value of
    every such string of the specs is replaced by its reference (``toolflow._provenance.Redactor``):
    a step's ``with:`` template renders a secret into plain text, which no longer carries the mark.
    """
    from toolflow._provenance import Interpolated, Redactor  # noqa: PLC0415

    redact = Redactor(string for spec in specs for _, string in spec.interpolated)

    def shown(value: Any) -> Any:
        if type(value) is Interpolated:
            return value.reference
        if isinstance(value, str):
            return redact(value)
        if isinstance(value, Mapping):
            return {shown(key): shown(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [shown(item) for item in value]
        return value

    return shown


def spec_paths(paths: Sequence[str]) -> list[str]:
    """The PATH arguments, or ``[tool.toolflow] specs`` from pyproject.toml, or ``specs/``."""
    if paths:
        return list(paths)
    from toolflow._project import load_project  # noqa: PLC0415

    return list(load_project().specs)


def shutdown_grace(args: argparse.Namespace) -> float:
    """``--shutdown-grace``, else ``[tool.toolflow] shutdown-grace``, else 10 seconds."""
    from toolflow._project import load_project  # noqa: PLC0415
    from toolflow._shutdown import DEFAULT_GRACE, parse_grace  # noqa: PLC0415

    if args.shutdown_grace is not None:
        return parse_grace(args.shutdown_grace, where="--shutdown-grace")
    configured = load_project().shutdown_grace
    return DEFAULT_GRACE if configured is None else configured


def project_cache_settings(args: argparse.Namespace | None = None) -> dict[str, Any]:
    """The project's cache and state settings, as ``open_engine`` takes them.

    ``[tool.toolflow.cache]`` (path, backend, options, timeout), and the state backend that
    ``--state`` (serve's), ``TOOLFLOW_STATE`` or ``[tool.toolflow] state`` names
    (:func:`toolflow._project.state_setting`); a shared one (Redis) holds the persistent cache.
    The backend lives as long as the command.

    Raises:
        UsageError: The state is not a URL toolflow knows, redis-py is missing for a Redis one,
            ``TOOLFLOW_STATE_SECRET`` is too short, or ``TOOLFLOW_LEASE_TTL`` is not a duration.
    """
    from toolflow._cache import default_cache_path  # noqa: PLC0415
    from toolflow._project import load_project, state_setting  # noqa: PLC0415
    from toolflow._state import LEASE_TTL  # noqa: PLC0415
    from toolflow._state_config import handle_keys_from_environ, lease_ttl_from_environ, state_from_url  # noqa: PLC0415

    project = load_project()
    path = project.cache_path if project.cache_path is not None else default_cache_path(project.root)
    settings: dict[str, Any] = {
        "cache_path": os.fspath(path),
        "cache_backend": project.cache_backend,
        "cache_options": project.cache_options,
    }
    if project.cache_timeout is not None:
        settings["cache_timeout"] = project.cache_timeout
    url = state_setting(getattr(args, "state", None), project, os.environ)
    # A weak secret or a bad TOOLFLOW_LEASE_TTL fails now, not at the first session's engine.
    keys = handle_keys_from_environ(os.environ) if url is not None else None
    ttl = lease_ttl_from_environ(os.environ) if url is not None else LEASE_TTL
    # One backend for the command's engines (serve's sessions): a rate_limit counts across them.
    settings["state"] = state_from_url(url, keys=keys, lease_ttl=ttl)
    return settings


def serve_state_settings(http: Any, state: Any, stderr: TextIO) -> dict[str, Any]:
    """``toolflow serve``'s keys and its conversations' lifetime (``ToolService.under_policy``'s).

    The keys (:class:`toolflow._state_config.FleetKeys`) come from ``TOOLFLOW_STATE_SECRET`` (and
    ``_PREVIOUS``); without a secret they are this process's own, and a shared state (a fleet's
    Redis) served over HTTP gets one warning: handles and task ids then hold only on the replica
    that minted them. Conversations are kept in the state over HTTP, not over stdio (one client,
    one engine) or under ``--stateless`` (no handles): they live the HTTP sessions' idle timeout.
    """
    from toolflow._state_config import SECRET_ENV, FleetKeys  # noqa: PLC0415

    keys = FleetKeys.from_environ(os.environ)
    keeps_conversations = http is not None and not http.stateless
    if keeps_conversations and not keys.from_secret and state is not None and state.shared:
        print(
            f"toolflow: warning: {SECRET_ENV} is not set: the conversation handles and task ids this replica"
            " mints are good on this replica only (set the same secret on every replica of the fleet)",
            file=stderr,
            flush=True,
        )
    return {"keys": keys, "conversation_ttl": http.session_idle_timeout if keeps_conversations else None}


def open_tools(specs: LoadResult, plugins: Plugins, *, no_cache: bool = False) -> AbstractAsyncContextManager[Registry]:
    """The registry of *specs*, the tools of their MCP servers in it, connected for the ``async with`` block.

    *no_cache* (``--no-cache``) removes every tool's cache.
    """
    import contextlib  # noqa: PLC0415

    from toolflow._mcp_sources import open_registry  # noqa: PLC0415
    from toolflow._registry import without_caches  # noqa: PLC0415

    @contextlib.asynccontextmanager
    async def opened() -> Any:
        async with open_registry(specs, plugins=plugins) as registry:
            yield without_caches(registry) if no_cache else registry

    return opened()


def registry_to_read(paths: Sequence[str], plugins: Plugins, stderr: TextIO) -> Registry:
    """The registry of the specs at *paths*, with the tools of their MCP servers, to read (not to call) its tools."""
    from toolflow._loader import load_specs  # noqa: PLC0415
    from toolflow._registry import Registry  # noqa: PLC0415

    specs = load_specs(paths, **plugins.loader_options())
    if not specs.mcp_servers:
        return Registry.build(specs, plugins)

    async def opened() -> Registry:
        async with open_tools(specs, plugins) as registry:
            return registry  # the servers' connections close; the specs are all a reader needs

    return run_trio(opened, stderr)


def remote_tools(specs: LoadResult, stderr: TextIO) -> list[ToolSpec]:
    """The specs of the tools the MCP servers of *specs* list (each connected briefly); none without servers."""
    if not specs.mcp_servers:
        return []
    from toolflow._mcp_sources import remote_specs  # noqa: PLC0415

    return run_trio(lambda: remote_specs(specs), stderr)


def run_trio(main: Callable[[], Awaitable[_T]], stderr: TextIO) -> _T:
    """``trio.run(main)``, printing the engine's call-hook and cache warnings as ``toolflow: warning: ...``."""
    import warnings  # noqa: PLC0415

    import trio  # noqa: PLC0415

    from toolflow._cache import CacheWarning  # noqa: PLC0415
    from toolflow._invoke import CallHookWarning  # noqa: PLC0415
    from toolflow._mcp_sources import ToolSourceWarning  # noqa: PLC0415

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CallHookWarning)
        warnings.simplefilter("always", CacheWarning)
        warnings.simplefilter("always", ToolSourceWarning)
        result = trio.run(main)
    for warning in caught:
        print(f"toolflow: warning: {warning.message}", file=stderr)
    return result


def approver(mode: str | None, out: TextIO) -> Any:
    """The approver of ``--approve ask|yes|no`` (None: the plugins decide); ``ask`` prompts on *out*.

    Without ``--approve``, ask when standard input is a terminal.
    """
    if mode == "yes":
        return lambda _call, _category: True
    if mode == "no":
        return lambda _call, _category: False
    if mode == "ask" or (mode is None and sys.stdin.isatty()):
        import trio  # noqa: PLC0415

        from toolflow._approval import ApprovalReason  # noqa: PLC0415 - imports trio, which lint never loads

        async def ask(call: ToolCall, category: str) -> bool:
            arguments = json.dumps(dict(call.arguments), ensure_ascii=False)
            steps = f" (approving its steps {', '.join(call.approves)} too)" if call.approves else ""
            # A tool's own approval says why: its category alone would not.
            if isinstance(category, ApprovalReason) and category.by_tool:
                steps += f" ({category.text})"
            out.write(f"approve {category} call {call.name} {arguments}{steps}? [y/N] ")
            out.flush()
            try:
                # A blocked readline() cannot be interrupted: on Ctrl-C (a stop or a kill cancels
                # the wait) the thread is left to end with the process.
                answer = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            except trio.Cancelled:
                out.write("\n")  # end the unanswered prompt's line before the trace goes on
                raise
            return answer.strip().lower() in {"y", "yes"}

        return ask
    return None
