"""A project whose command tool starts a process tree, for the tests of signals and shutdown.

``tree`` runs a shell script that starts a child and a second shell, which starts a grandchild;
all of them sleep. It writes every pid into a file, one per line, so a test knows the whole tree
and can check that none of it survives. ``nap`` sleeps a while and then answers.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from _mcp_wire import pids_alive

TREE_SCRIPT = """\
#!/bin/sh
# A child and a second shell with a grandchild, all sleeping; every pid goes into the file "$1".
sleep 300 &
echo $! >> "$1"
sh -c 'sleep 300 & echo $! >> "$0"; wait' "$1" &
echo $! >> "$1"
echo $$ >> "$1"
wait
"""

NAP_SCRIPT = """\
#!/bin/sh
# Say "started" in the file "$1", sleep "$2" seconds, then answer.
echo started > "$1"
sleep "$2"
echo rested
"""

SPECS = """\
toolflow: 1
tools:
  tree:
    description: Start a process tree that sleeps for five minutes.
    category: safe_chain
    retry: false
    timeout: 10m
    parameters:
      type: object
      properties:
        pids: {{type: string, description: The file to write the pids into.}}
      required: [pids]
    command: [{tree}, "{{{{ pids }}}}"]
  nap:
    description: Sleep for a while, then answer.
    category: safe_chain
    retry: false
    timeout: 10m
    parameters:
      type: object
      properties:
        marker: {{type: string, description: The file that says the nap started.}}
        seconds: {{type: number, description: How long to sleep.}}
      required: [marker, seconds]
    command: [{nap}, "{{{{ marker }}}}", "{{{{ seconds }}}}"]
  greet:
    description: Greet someone.
    category: safe_chain
    parameters:
      type: object
      properties:
        name: {{type: string, description: Who.}}
      required: [name]
    template: "Hello, {{{{ name }}}}!"
"""

TREE_SIZE = 4
"""Processes of one tree: the script, its child, the second shell and the grandchild."""


def write_tree_project(root: Path) -> Path:
    """Write the project (specs, scripts, pyproject.toml) into *root* and return it."""
    for name, text in (("tree.sh", TREE_SCRIPT), ("nap.sh", NAP_SCRIPT)):
        script = root / name
        script.write_text(text, encoding="utf-8")
        script.chmod(0o755)
    (root / "specs").mkdir(parents=True, exist_ok=True)
    (root / "specs" / "tools.yaml").write_text(
        SPECS.format(tree=root / "tree.sh", nap=root / "nap.sh"), encoding="utf-8"
    )
    (root / "pyproject.toml").write_text('[project]\nname = "trees"\n', encoding="utf-8")
    return root


def wait_for_tree(pids_file: Path) -> list[int]:
    """The pids of the tree once all of them are written."""
    _wait(lambda: pids_file.exists() and len(pids_file.read_text().split()) >= TREE_SIZE, f"the tree in {pids_file}")
    return [int(line) for line in pids_file.read_text().split()]


def wait_for_file(path: Path) -> None:
    _wait(path.exists, str(path))


def _wait(done: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{what} never appeared"
        time.sleep(0.02)


def assert_gone(pids: list[int], timeout: float = 10) -> None:
    """Every process of *pids* has ended (killed processes may take a moment to be reaped)."""
    deadline = time.monotonic() + timeout
    while alive := pids_alive(pids):
        if time.monotonic() > deadline:
            for pid in alive:  # do not leave them behind for the next test
                os.kill(pid, 9)
            raise AssertionError(f"processes of the tree survived: {alive}")
        time.sleep(0.02)
