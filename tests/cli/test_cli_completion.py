"""`toolflow completion bash|zsh|fish`: the scripts parse, and complete in the real shells.

bash is always here; `python3 tasks.py test` (and so CI) installs zsh and fish from Debian's
packages where they are missing. Where it cannot (not root, no apt-get), it says why, and the
zsh and fish tests skip with that reason; their scripts' structure is checked all the same.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from toolflow._cli import _parser, run

TIMEOUT = 60
"""Seconds a shell may take to load a script and complete (a guard: it takes well under one)."""

MISSING = os.environ.get("TOOLFLOW_TEST_MISSING_PACKAGES") or "not installed (python3 tasks.py test installs it)"
"""Why zsh or fish is missing, as `tasks.py test` found it."""

LINT_FORMATS = ["full", "github", "gitlab", "json", "junit", "sarif", "text"]


def script(shell: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert run(["completion", shell], stdout=out, stderr=err) == 0, err.getvalue()
    return out.getvalue()


def shell(workdir: Path, *argv: str) -> str:
    """The standard output of *argv*, a shell run in *workdir*, which must succeed."""
    result = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=TIMEOUT, check=True)
    assert result.stderr == ""
    return result.stdout


def commands() -> list[str]:
    parser = _parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(subparsers.choices)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory with a `specs/` and a `my specs/` directory to complete paths in."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "room.yaml").write_text("toolflow: 1\ntools: {}\n", encoding="utf-8")
    (tmp_path / "my specs").mkdir()
    return tmp_path


def test_an_unknown_shell_is_a_usage_error() -> None:
    """Only bash, zsh and fish have scripts."""
    out, err = io.StringIO(), io.StringIO()
    assert run(["completion", "powershell"], stdout=out, stderr=err) == 2
    assert "invalid choice: 'powershell'" in err.getvalue()


# -- bash ---------------------------------------------------------------------------------------------------------


def bash_complete(workdir: Path, *words: str) -> list[str]:
    """What the script's function puts in COMPREPLY for the command line *words* (the last is being typed)."""
    path = workdir / "toolflow.bash"
    path.write_text(script("bash"), encoding="utf-8")
    program = textwrap.dedent(
        """\
        source ./toolflow.bash
        COMP_WORDS=("$@")
        COMP_CWORD=$(( $# - 1 ))
        _toolflow
        printf '%s\\n' "${COMPREPLY[@]}"
        """
    )
    out = shell(workdir, "bash", "--norc", "--noprofile", "-c", program, "bash", *words)
    return sorted(line for line in out.splitlines() if line)


def test_bash_parses_the_script(tmp_path: Path) -> None:
    """`bash -n` reads the script without a syntax error, and it registers its function for `toolflow`."""
    path = tmp_path / "toolflow.bash"
    path.write_text(script("bash"), encoding="utf-8")
    subprocess.run(["bash", "-n", str(path)], check=True, timeout=TIMEOUT)
    loaded = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", f"source {path} && complete -p toolflow"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    )
    assert loaded.stdout == "complete -F _toolflow toolflow\n"


def test_bash_completes_subcommands(workdir: Path) -> None:
    """`toolflow li<TAB>` offers lint and list; an empty word offers every subcommand and the global options."""
    assert bash_complete(workdir, "toolflow", "li") == ["lint", "list"]
    assert bash_complete(workdir, "toolflow", "") == sorted([*commands(), "-h", "--help", "--version"])


def test_bash_completes_options_and_their_choices(workdir: Path) -> None:
    """A subcommand's options, and the choices of an option's value, in both `--opt value` and `--opt=value`."""
    assert bash_complete(workdir, "toolflow", "lint", "--ex") == ["--exit-zero", "--extend-select"]
    assert bash_complete(workdir, "toolflow", "lint", "--output-format", "") == LINT_FORMATS
    assert bash_complete(workdir, "toolflow", "lint", "--output-format", "=", "j") == ["json", "junit"]
    assert bash_complete(workdir, "toolflow", "run", "--output-format", "=") == ["json", "text"]
    assert bash_complete(workdir, "toolflow", "completion", "") == ["bash", "fish", "zsh"]
    assert bash_complete(workdir, "toolflow", "lint", "--select", "") == []


def test_bash_leaves_deprecated_spellings_out(workdir: Path) -> None:
    """`--json` still works, but completion offers only `--output-format`."""
    assert bash_complete(workdir, "toolflow", "list", "--") == ["--help", "--output-format"]


def test_bash_completes_paths_where_a_command_takes_them(workdir: Path) -> None:
    """PATH arguments and path options complete file names, a name with a space as one word; others do not."""
    assert bash_complete(workdir, "toolflow", "lint", "sp") == ["specs"]
    assert bash_complete(workdir, "toolflow", "lint", "specs/") == ["specs/room.yaml"]
    assert bash_complete(workdir, "toolflow", "graph", "my") == ["my specs"]
    assert bash_complete(workdir, "toolflow", "call", "--specs", "sp") == ["specs"]
    assert bash_complete(workdir, "toolflow", "serve", "--project", "") == ["my specs", "specs"]
    assert bash_complete(workdir, "toolflow", "rule", "sp") == []


# -- zsh ----------------------------------------------------------------------------------------------------------

ZSH_CAPTURE = """\
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PS1=''; toolflow () { : }; autoload -Uz compinit; compinit -u -D; source ${(q)1}"
zpty -w z 'compadd () { local -a h; builtin compadd -O h "$@"; (( $#h )) && print -l -- "@@"${^h}; builtin compadd "$@" }'
zpty -w z "$2"$'\\t'
zpty -w z $'\\C-u'"print -- END''MARK"
out=""
for i in {1..200}; do
  if zpty -r -t z line; then out+="$line"; [[ $out == *ENDMARK* ]] && break; else sleep 0.05; fi
done
zpty -d z
print -r -- "$out"
"""
"""Types the line and a <TAB> into an interactive zsh on a pseudo-terminal, printing each match `compadd`
is given as `@@MATCH` (a stand-in around the builtin records them)."""


def zsh_complete(workdir: Path, line: str) -> list[str]:
    (workdir / "_toolflow").write_text(script("zsh"), encoding="utf-8")
    (workdir / "capture.zsh").write_text(ZSH_CAPTURE, encoding="utf-8")
    out = shell(workdir, "zsh", "-f", "capture.zsh", str(workdir / "_toolflow"), line)
    assert "ENDMARK" in out, out
    # The first match may follow the echo of the typed line; the stand-in's own echo has `"@@"`, no name.
    return sorted({f"@@{name}" for name in re.findall(r"@@([\w./-]+)", out)})


def test_zsh_script_structure() -> None:
    """The script is a `#compdef` function that also registers itself when sourced."""
    text = script("zsh")
    assert text.startswith("#compdef toolflow\n")
    assert "    compdef _toolflow toolflow\n" in text
    assert all(f"                {name})\n" in text for name in commands())
    assert "'--output-format=[report format]:output-format:(text full json github sarif junit gitlab)'" in text


@pytest.mark.skipif(shutil.which("zsh") is None, reason=f"zsh: {MISSING}")
def test_zsh_parses_and_completes(workdir: Path) -> None:
    """`zsh -n` reads the script, and a real interactive zsh completes subcommands, choices and paths with it."""
    (workdir / "_toolflow").write_text(script("zsh"), encoding="utf-8")
    subprocess.run(["zsh", "-n", str(workdir / "_toolflow")], check=True, timeout=TIMEOUT)
    assert zsh_complete(workdir, "toolflow li") == ["@@lint", "@@list"]
    assert zsh_complete(workdir, "toolflow lint --output-format ") == [f"@@{f}" for f in LINT_FORMATS]
    assert zsh_complete(workdir, "toolflow run --output-format=") == ["@@json", "@@text"]
    assert zsh_complete(workdir, "toolflow lint --ex") == ["@@--exit-zero", "@@--extend-select"]
    assert "@@specs" in zsh_complete(workdir, "toolflow lint sp")


# -- fish ---------------------------------------------------------------------------------------------------------


def fish_complete(workdir: Path, line: str) -> list[str]:
    (workdir / "toolflow.fish").write_text(script("fish"), encoding="utf-8")
    out = shell(workdir, "fish", "--no-config", "-c", f"source toolflow.fish; complete -C {line!r}")
    return sorted(entry.split("\t")[0] for entry in out.splitlines())


def test_fish_script_structure() -> None:
    """Files are off unless a command takes paths; each subcommand is offered only before one is typed."""
    text = script("fish")
    assert "complete -c toolflow -f\n" in text
    assert all(f"complete -c toolflow -n 'not __toolflow_command' -a {name} " in text for name in commands())
    assert "complete -c toolflow -n '__toolflow_using lint' -F\n" in text


@pytest.mark.skipif(shutil.which("fish") is None, reason=f"fish: {MISSING}")
def test_fish_parses_and_completes(workdir: Path) -> None:
    """`fish -n` reads the script, and fish's own `complete -C` completes with it."""
    (workdir / "toolflow.fish").write_text(script("fish"), encoding="utf-8")
    subprocess.run(["fish", "--no-config", "-n", str(workdir / "toolflow.fish")], check=True, timeout=TIMEOUT)
    assert fish_complete(workdir, "toolflow li") == ["lint", "list"]
    assert fish_complete(workdir, "toolflow lint --output-format ") == LINT_FORMATS
    assert fish_complete(workdir, "toolflow lint --ex") == ["--exit-zero", "--extend-select"]
    assert fish_complete(workdir, "toolflow completion ") == ["bash", "fish", "zsh"]
    assert fish_complete(workdir, "toolflow lint sp") == ["specs/"]
    assert fish_complete(workdir, "toolflow rule sp") == []


# -- the shells in CI ---------------------------------------------------------------------------------------------


def test_tasks_says_why_it_cannot_install_a_missing_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no apt-get on PATH, `tasks.system_packages` installs nothing and returns and prints the reason."""
    spec = importlib.util.spec_from_file_location("tasks", Path(__file__).resolve().parents[2] / "tasks.py")
    assert spec is not None
    assert spec.loader is not None
    tasks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tasks)
    monkeypatch.setenv("PATH", str(tmp_path))
    reason = tasks.system_packages("toolflow-test-absent-shell")
    assert reason == "toolflow-test-absent-shell not installed: apt-get is not available"
    assert reason in capsys.readouterr().err
    assert tasks.system_packages() == ""
