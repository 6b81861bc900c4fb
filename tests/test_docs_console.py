"""The README's console examples run, and their output is what the README shows (issue 17, section 7).

Each ``$ command`` of a ```` ```console ```` block runs (``toolflow`` is this checkout's, run with
this Python) in the repository root, or in a project a ``<!-- console: in NAME -->`` line above
the block names (``SETUPS`` builds it), and each line the README shows after the command must
come out, in order. Lines may be left out, and ``...`` in a shown line stands for any text;
durations (``606 ms``) are compared as numbers of milliseconds, whatever they are. A block
under ``<!-- console: skip (why) -->`` is not run.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_MARKER = re.compile(r"^<!-- console: (skip|in) ?([^ ]*).* -->$")
_DURATION = re.compile(r"\d+(?:\.\d+)? ms\b")


def _room(folder: Path) -> Path:
    """The README's `whisper` spec, with the typo the text around the lint example describes."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("# specs/room.yaml\n", 1)[1].split("```", 1)[0]
    (folder / "specs").mkdir()
    (folder / "specs" / "room.yaml").write_text(block.replace("{{ message }}", "{{ mesage }}"), encoding="utf-8")
    return folder


SETUPS: dict[str, Callable[[Path], Path]] = {"room": _room}


def _examples(path: Path) -> list[object]:
    """``(command, shown lines, setup)`` of every console example of *path*, as pytest parameters."""
    lines = path.read_text(encoding="utf-8").splitlines()
    examples: list[object] = []
    marker: re.Match[str] | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        if _MARKER.match(line):
            marker = _MARKER.match(line)
        elif line == "```console":
            end = lines.index("```", index + 1)
            if not (marker and marker[1] == "skip"):
                setup = marker[2] if marker else ""
                examples.extend(_commands(lines[index + 1 : end], setup, f"{path.name}:{index + 2}"))
            marker = None
            index = end
        elif line.strip():
            marker = None
        index += 1
    return examples


def _commands(block: list[str], setup: str, where: str) -> list[object]:
    found: list[object] = []
    for offset, line in enumerate(block):
        if line.startswith("$ "):
            shown = []
            for after in block[offset + 1 :]:
                if after.startswith("$ "):
                    break
                shown.append(after)
            found.append(pytest.param(line[2:], shown, setup, id=f"{where}+{offset}: {line[2:40]}"))
    return found


def _pattern(line: str) -> re.Pattern[str]:
    parts = [_DURATION.sub("\0", part) for part in line.split("...")]
    escaped = [re.escape(part).replace("\0", r"\d+(?:\.\d+)? ms") for part in parts]
    return re.compile(".*".join(escaped))


@pytest.mark.parametrize(("command", "shown", "setup"), _examples(ROOT / "README.md"))
def test_a_readme_console_example_prints_what_it_shows(
    tmp_path: Path, command: str, shown: list[str], setup: str
) -> None:
    """The command runs, and every line the README shows comes out, in order."""
    arguments = shlex.split(command, comments=True)
    assert arguments[0] == "toolflow", f"only toolflow commands run here: {command!r}"
    cwd = SETUPS[setup](tmp_path) if setup else ROOT
    env = {key: value for key, value in os.environ.items() if not key.startswith("TOOLFLOW_")}
    done = subprocess.run(
        [sys.executable, "-m", "toolflow", *arguments[1:]],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    output = (done.stdout + done.stderr).splitlines()
    position = 0
    for line in shown:
        pattern = _pattern(line)
        while position < len(output) and not pattern.fullmatch(output[position]):
            position += 1
        assert position < len(output), f"README shows {line!r}, not printed by {command!r}:\n" + "\n".join(output)
        position += 1
