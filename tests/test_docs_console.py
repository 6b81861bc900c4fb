"""The docs' console examples run, and their output is what the page shows (issue 17, section 7).

Each page (the README and every ``docs/*.md``) is one test. Its ```` ```console ```` blocks run in
order, each ``$ command`` through ``bash`` in the page's project (``toolflow`` on ``PATH`` is this
checkout's, run with this Python; ``HOME`` is a scratch folder), so what one command leaves behind
the next one sees, across blocks too, as for a reader who types them in turn. Only ``toolflow``
and a few file commands run (``RUNNABLE``): a block that installs, uploads or starts a server
needs a skip marker, and the test refuses to run it otherwise. The lines a page shows after a
command are compared with everything the command printed (stdout and stderr, in the order written):

- a line that is only ``...`` (indented or not) stands for any number of lines, and ``...`` in a
  line for any text: commit hashes, paths, values too long to show;
- a duration (``606 ms``, ``0.60s``) stands for any duration;
- a command shown without output is run, not compared, and must exit with status 0.

The page's project is a fresh directory. A page that shows no files of its own starts from a copy
of the checkout's example project (``pyproject.toml``, ``specs/``, ``examples/``,
``tests/specs/``). A page that builds one (the tutorial) says which of its code blocks are files
with a comment right above the block, and they are written when the text reaches them, so a
change of the text is what the test runs:

- ``<!-- file: specs/greet.yaml -->``: the block is the whole file;
- ``<!-- file: specs/greet.yaml (append) -->``: the block goes at the end of the file;
- ``<!-- file: specs/greet.yaml (edit) -->``: the block's first line is a line of the file, and
  the block takes its place (with the lines the text adds after it).

Above a console block, ``<!-- console: skip (why) -->`` leaves it out (the reason is required;
keep skips rare), and ``<!-- console: in NAME (why) -->`` runs it where ``SETUPS[NAME]`` says,
after a change the prose describes without showing the file (a setup that the text later takes
back works on a copy). ``<!-- console: skip-page (why) -->`` leaves a whole page out (the
benchmarks'). A failure names the page, the line of the command and a diff of the shown and the
printed lines, for every command that differs.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLE_PROJECT = ["pyproject.toml", "specs", "examples", "tests/specs"]
_CONSOLE = re.compile(r"^<!-- console: (skip|in) ?([\w-]*) ?(\(.+\))? -->$")
_SKIP_PAGE = re.compile(r"^<!-- console: skip-page \(.+\) -->$", re.MULTILINE)
_FILE = re.compile(r"^<!-- file: (\S+)(?: \((append|edit)\))? -->$")
_FENCE = re.compile(r"^```([\w-]*)$")
_DURATION = re.compile(r"\d+(?:\.\d+)? ?(?:ms|s)\b")
# What a block may run: toolflow itself and commands that only make or show files in the project.
# Anything else (installs, uploads, servers that run until stopped) needs a skip marker; the test
# refuses to run it rather than trusting the page.
RUNNABLE = {"toolflow", "mkdir", "echo", "cat", "ls"}
_SEPARATORS = re.compile(r"&&|\|\||[|;]")
_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")
_REDIRECT = re.compile(r">>?\s*(\S+)")


class File(NamedTuple):
    """A code block that is a file of the page's project."""

    path: str
    mode: str
    text: str


class Command(NamedTuple):
    """One ``$ command`` of a console block and the lines the page shows after it."""

    line: int
    text: str
    shown: list[str]


class Block(NamedTuple):
    """A console block: the setup it names and its commands."""

    setup: str
    commands: list[Command]


# --- setups: what the prose changes without showing the file ------------------------------------


def _room(project: Path) -> Path:
    """The README's `whisper` spec, with the typo the text around the lint example describes."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("# specs/room.yaml\n", 1)[1].split("```", 1)[0]
    room = project.parent / "room"
    (room / "specs").mkdir(parents=True)
    (room / "specs" / "room.yaml").write_text(block.replace("{{ message }}", "{{ mesage }}"), encoding="utf-8")
    return room


def _git_history(project: Path) -> Path:
    """The tutorial's project is a git repository with two commits, which `recent_commits` lists."""
    for argv in (
        ["git", "init", "--quiet"],
        ["git", "commit", "--quiet", "--allow-empty", "-m", "Add greetings"],
        ["git", "commit", "--quiet", "--allow-empty", "-m", "Fix the greeting's punctuation"],
    ):
        subprocess.run(argv, cwd=project, env=_environment(project.parent), check=True, timeout=60)
    return project


def _note_id(project: Path) -> Path:
    """A copy of the tutorial's project whose plugin function calls its parameter `note_id`, as the text asks.

    A copy, because the text takes the rename back: later sections run the plugin as shown.
    """
    renamed = project.parent / "note-id"
    shutil.copytree(project, renamed, symlinks=True)
    plugin = renamed / "notes_plugin.py"
    text = plugin.read_text(encoding="utf-8")
    plugin.write_text(text.replace("def delete_note(id: str)", "def delete_note(note_id: str)"), encoding="utf-8")
    return renamed


def _block_after(page: str, marker: str) -> str:
    """The text of the first code block after the line *marker* of the docs page *page*."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    fenced = text.split(f"\n{marker}\n", 1)[1].split("```", 1)[1]
    return fenced.split("\n", 1)[1].split("\n```\n", 1)[0] + "\n"


def _preview_order(project: Path) -> Path:
    """The calling-tools page's `preview_order` spec, saved beside the example specs."""
    spec = _block_after("calling-tools.md", "has work to do. The stages run in this order; the examples use this spec:")
    (project / "specs" / "preview.yaml").write_text(spec, encoding="utf-8")
    return project


def _orders(project: Path) -> Path:
    """The linting page's `specs/orders.yaml`, the pipeline with the mistakes its expect marker names."""
    spec = _block_after("linting.md", "<!-- expect: TF227, TF228, TF230, TF230, TF231, TF232, TF234, TF235 -->")
    (project / "specs" / "orders.yaml").write_text(spec, encoding="utf-8")
    return project


def _empty_config(project: Path) -> Path:
    """An empty `config/` directory, which the example of TF008 lints."""
    (project / "config").mkdir(exist_ok=True)
    return project


SETUPS: dict[str, Callable[[Path], Path]] = {
    "empty-config": _empty_config,
    "orders": _orders,
    "preview-order": _preview_order,
    "room": _room,
    "git-history": _git_history,
    "note-id": _note_id,
}


# --- reading a page -----------------------------------------------------------------------------


def read_page(text: str) -> list[File | Block]:
    """The files and console blocks of a Markdown page, in the order the text reaches them."""
    lines = text.splitlines()
    steps: list[File | Block] = []
    markers: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = _FENCE.match(line)
        if line.startswith("<!--"):
            markers.append(line)
        elif fence and fence[1]:
            end = lines.index("```", index + 1)
            body = lines[index + 1 : end]
            steps.extend(_step(fence[1], body, markers, index + 2))
            markers = []
            index = end
        elif line.strip():
            markers = []
        index += 1
    return steps


def _step(language: str, body: list[str], markers: list[str], first: int) -> list[File | Block]:
    files = [m for m in map(_FILE.match, markers) if m]
    if files:
        return [File(files[0][1], files[0][2] or "whole", "\n".join(body) + "\n")]
    if language != "console":
        return []
    console = next((m for m in map(_CONSOLE.match, markers) if m), None)
    bad = [m for m in markers if m.startswith("<!-- console") and not (_CONSOLE.match(m) and "(" in m)]
    assert not bad, f"line {first - 1}: a console marker needs a reason in parentheses: {bad[0]}"
    if console and console[1] == "skip":
        return []
    commands = []
    for offset, line in enumerate(body):
        if line.startswith("$ "):
            shown = []
            for after in body[offset + 1 :]:
                if after.startswith("$ "):
                    break
                shown.append(after)
            commands.append(Command(first + offset, line[2:], shown))
    return [Block(console[2] if console else "", commands)]


# --- comparing ----------------------------------------------------------------------------------


def _pattern(shown: list[str]) -> re.Pattern[str]:
    """A pattern for the whole output: ``...`` lines, ``...`` in lines and durations stand for anything."""
    parts = []
    for line in shown:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        pieces = [_DURATION.sub("\0", piece) for piece in line.split("...")]
        escaped = [re.escape(piece).replace("\0", r"\d+(?:\.\d+)? ?(?:ms|s)") for piece in pieces]
        parts.append("[^\n]*".join(escaped) + r"\n")
    return re.compile("".join(parts))


def matches(shown: list[str], printed: list[str]) -> bool:
    """Whether *printed* is what *shown* shows (see the module docstring)."""
    return _pattern(_trimmed(shown)).fullmatch("".join(f"{line}\n" for line in _trimmed(printed))) is not None


def _trimmed(lines: list[str]) -> list[str]:
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


# --- running ------------------------------------------------------------------------------------


def _environment(scratch: Path) -> dict[str, str]:
    """This checkout's `toolflow` (in *scratch*/bin) first on PATH; no TOOLFLOW_ settings or git configuration of the host."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TOOLFLOW_", "GIT_"))}
    bin_dir = scratch / "bin"
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env["HOME"] = str(scratch / "home")
    env["GIT_CONFIG_GLOBAL"] = os.devnull
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    for who in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{who}_NAME"] = "Ada"
        env[f"GIT_{who}_EMAIL"] = "ada@example.com"
    return env


# A setup for every block of a page, where the page is generated and cannot hold markers.
PAGE_SETUPS = {"docs/rules.md": "empty-config"}


def _project(tmp_path: Path, steps: list[File | Block]) -> Path:
    """The page's project directory, with a `toolflow` command of this checkout beside it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "home").mkdir()
    shim = bin_dir / "toolflow"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m toolflow "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    project = tmp_path / "project"
    project.mkdir()
    if not any(isinstance(step, File) for step in steps):
        for name in EXAMPLE_PROJECT:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, project / name)
            else:
                shutil.copy2(source, project / name)
    return project


def _write(project: Path, file: File) -> None:
    path = project / file.path
    path.parent.mkdir(parents=True, exist_ok=True)
    if file.mode == "whole":
        path.write_text(file.text, encoding="utf-8")
        return
    old = path.read_text(encoding="utf-8")
    if file.mode == "append":
        path.write_text(old + file.text, encoding="utf-8")
        return
    anchor = file.text.splitlines(keepends=True)[0]
    assert anchor in old, f"{file.path} has no line {anchor!r} for the edit to start at"
    path.write_text(old.replace(anchor, file.text, 1), encoding="utf-8")


def refusal(command: str) -> str | None:
    """Why *command* may not run (see ``RUNNABLE``), or None if it may."""
    for part in _SEPARATORS.split(command):
        words = [w for w in part.split() if not _ASSIGNMENT.match(w)]
        if words and words[0] not in RUNNABLE:
            return f"runs {words[0]!r}, which is not one of {sorted(RUNNABLE)}"
        if words[:2] == ["toolflow", "serve"]:
            return "starts a server that runs until stopped"
    for target in _REDIRECT.findall(command):
        if target.startswith(("/", "~", "$")) or ".." in target:
            return f"writes {target!r}, outside the project"
    return None


def _run(command: Command, cwd: Path, scratch: Path, page: str) -> str | None:
    """None if *command* printed what the page shows, else what the failure message says of it."""
    refused = refusal(command.text)
    if refused:
        return f"{page}:{command.line}: `$ {command.text}` {refused}: mark its block <!-- console: skip (why) -->"
    done = subprocess.run(
        ["bash", "-c", command.text],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
        check=False,
        env=_environment(scratch),
    )
    printed = done.stdout.splitlines()
    if not command.shown:
        if done.returncode == 0:
            return None
        return f"{page}:{command.line}: `$ {command.text}` exited with {done.returncode}:\n{done.stdout}"
    if matches(command.shown, printed):
        return None
    diff = difflib.unified_diff(_trimmed(command.shown), _trimmed(printed), "shown", "printed", lineterm="")
    return f"{page}:{command.line}: `$ {command.text}` printed other lines than the page shows:\n" + "\n".join(diff)


def _pages() -> list[Any]:
    found = []
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        if _SKIP_PAGE.search(text):
            continue
        steps = read_page(text)
        if any(isinstance(step, Block) and step.commands for step in steps):
            found.append(pytest.param(path, id=path.relative_to(ROOT).as_posix()))
    return found


@pytest.mark.parametrize("page", _pages())
def test_a_page_console_examples_print_what_they_show(tmp_path: Path, page: Path) -> None:
    """Every command of the page runs in turn, and prints the lines the page shows after it."""
    name = page.relative_to(ROOT).as_posix()
    steps = read_page(page.read_text(encoding="utf-8"))
    project = _project(tmp_path, steps)
    failures: list[str] = []
    for step in steps:
        if isinstance(step, File):
            _write(project, step)
            continue
        setup = step.setup or PAGE_SETUPS.get(name, "")
        cwd = SETUPS[setup](project) if setup else project
        failures.extend(f for f in (_run(command, cwd, tmp_path, name) for command in step.commands) if f)
    assert not failures, "\n\n".join(failures)


# --- the harness itself -------------------------------------------------------------------------


def test_elisions_and_durations_match_what_differs_from_run_to_run() -> None:
    """``...`` lines stand for any lines, ``...`` in a line for any text, and a duration for any duration."""
    shown = ["turn 1 · 23 ms", "  ...", 'ok: "... Add greetings" (0.60s)', "end"]
    assert matches(shown, ["turn 1 · 473 ms", 'ok: "84cb809 Add greetings" (1.25s)', "end", ""])
    assert matches(shown, ["turn 1 · 4 ms", "a", "b", 'ok: " Add greetings" (3 s)', "end"])
    assert not matches(shown, ["turn 1 · 4 ms", 'ok: "84cb809 Add greetings" (1.25s)', "end", "more"])
    assert not matches(["a"], ["a", "b"]), "a line the page does not show is a difference"


def test_a_page_names_its_files_and_console_blocks_in_order() -> None:
    """File markers (whole, append, edit) and console markers are read; a skip without a reason is refused."""
    page = textwrap.dedent(
        """\
        <!-- file: specs/a.yaml -->
        <!-- expect: TF216 -->
        ```yaml
        toolflow: 1
        ```
        <!-- file: specs/a.yaml (append) -->
        ```yaml
        tools: {}
        ```
        <!-- console: in room (why) -->
        ```console
        $ toolflow lint
        All checks passed.
        $ toolflow list
        ```
        <!-- console: skip (installs) -->
        ```console
        $ pip install x
        ```
        """
    )
    assert read_page(page) == [
        File("specs/a.yaml", "whole", "toolflow: 1\n"),
        File("specs/a.yaml", "append", "tools: {}\n"),
        Block("room", [Command(12, "toolflow lint", ["All checks passed."]), Command(14, "toolflow list", [])]),
    ]
    with pytest.raises(AssertionError, match="needs a reason"):
        read_page("<!-- console: skip -->\n```console\n$ pip install x\n```\n")


def test_only_toolflow_and_file_commands_run() -> None:
    """Installs, servers and writes outside the project are refused, whatever the page says."""
    assert refusal("TOOLFLOW_LOAD_PLUGINS=x toolflow plugins") is None
    assert refusal('mkdir notes && echo "milk" > notes/list.txt') is None
    assert refusal("python -m twine upload dist/*") == "runs 'python', which is not one of " + str(sorted(RUNNABLE))
    assert refusal("toolflow serve --transport http") == "starts a server that runs until stopped"
    assert refusal("toolflow completion bash >> ~/.bashrc") == "writes '~/.bashrc', outside the project"
