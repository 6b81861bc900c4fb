"""JSON given on toolflow's command line that Python's decoder refuses is a usage error, never a traceback.

A number longer than Python reads in digits (``sys.get_int_max_str_digits``, 4,300 by default)
raises a plain ``ValueError`` and nesting past Python's recursion limit a ``RecursionError``,
neither of them a ``json.JSONDecodeError``: ``toolflow call``'s ARGS_JSON (as an argument, from
standard input, a whole call with ``--raw``), ``--context`` and ``toolflow run --result`` ended
with an internal error. Each now says what is wrong and exits 2; the model's own calls already
did (``toolflow._calls``), and all of them say it with ``toolflow._json.decode_problem``.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _cli_project import plugin_project
from _cli_project import toolflow as toolflow_in_process

LONG = '{"n": ' + "9" * 5000 + "}"
"""A number of 5,000 digits."""

DEEP = "[" * 100_000 + "]" * 100_000
"""Lists nested past Python's recursion limit."""

SPECS = """\
toolflow: 1
tools:
  echo:
    description: Say what it was given.
    parameters:
      type: object
      properties:
        n: {type: integer, description: A number}
    implementation: odd.echo
"""

PLUGIN = """\
import toolflow


@toolflow.hookimpl
def toolflow_register_implementations(register):
    register("odd.echo", lambda **arguments: arguments)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The spec and its plugin in a project that is the working directory."""
    with plugin_project(tmp_path, monkeypatch, specs=SPECS, module="odd_echo", plugin=PLUGIN) as path:
        yield path


def _toolflow(*args: str, stdin: str | None = None, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    return toolflow_in_process(*args)


REFUSALS = {
    "long": "Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits",
    "deep": "nested too deeply",
}
"""Why each text is refused, as the message says it (without Python's advice to programmers)."""

TEXTS = {"long": LONG, "deep": DEEP}


@pytest.mark.parametrize("kind", sorted(TEXTS))
@pytest.mark.parametrize("how", ["argument", "stdin", "raw"])
def test_toolflow_call_refuses_args_json_python_cannot_read(
    project: Path, monkeypatch: pytest.MonkeyPatch, kind: str, how: str
) -> None:
    """ARGS_JSON (or a --raw call) that the decoder refuses is a usage error naming why, exit 2."""
    if how == "argument":
        code, _, err = _toolflow("call", "echo", TEXTS[kind], monkeypatch=monkeypatch)
    elif how == "stdin":
        code, _, err = _toolflow("call", "echo", "-", stdin=TEXTS[kind], monkeypatch=monkeypatch)
    else:
        code, _, err = _toolflow("call", "--raw", "-", stdin=TEXTS[kind], monkeypatch=monkeypatch)
    assert code == 2, err
    what = "the tool call" if how == "raw" else "ARGS_JSON"
    assert err == f"toolflow: error: {what} is not valid JSON: {REFUSALS[kind]}\n"


@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_context_python_cannot_read_is_a_usage_error(project: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """--context whose JSON the decoder refuses is argparse's usage error, exit 2, no traceback."""
    text = TEXTS[kind] if kind == "long" else "[" * 5000 + "]" * 5000
    code, _, err = _toolflow("call", "echo", "--context", text, '{"n": 1}', monkeypatch=monkeypatch)
    assert code == 2, err
    assert f"argument --context: not valid JSON: {REFUSALS[kind]}" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_run_result_python_cannot_read_is_a_usage_error(
    project: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """toolflow run --result whose JSON the decoder refuses names the call and why, exit 2."""
    text = TEXTS[kind] if kind == "long" else "[" * 5000 + "]" * 5000
    args = ("run", "--model", "scripted:none.yaml", "--resume", "none.json", "--result", f"call_0={text}")
    code, _, err = _toolflow(*args, monkeypatch=monkeypatch)
    assert code == 2, err
    assert f"--result call_0: the result is not JSON ({REFUSALS[kind]})" in err


def test_a_number_python_reads_still_reaches_the_tool(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A number of 4,000 digits is read and passed on as it is."""
    code, out, err = _toolflow("call", "echo", '{"n": ' + "9" * 4000 + "}", monkeypatch=monkeypatch)
    assert code == 0, err
    assert "9" * 4000 in out
