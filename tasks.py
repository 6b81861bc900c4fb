#!/usr/bin/env python3
"""Set up and run toolflow's two jobs with nothing but Python 3.11.

    python3 tasks.py run    # install toolflow and its plugins, lint specs/, call tools (a pipeline, MCP), run a loop
    python3 tasks.py test   # install toolflow with its test tools, run ruff, mypy and every test (the wheels too)
    python3 tasks.py docs   # regenerate the generated parts of docs/

Both create (or reuse) a virtual environment in ``.venv`` beside this file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PLUGINS = sorted(p for p in (ROOT / "plugins").glob("*") if (p / "pyproject.toml").is_file())


def sh(*argv: str | Path) -> None:
    """Run a command from the project root; stop with its exit code if it fails."""
    print("+", " ".join(str(a) for a in argv), flush=True)
    code = subprocess.call([str(a) for a in argv], cwd=ROOT)
    if code != 0:
        sys.exit(code)


def installed(name: str) -> bool:
    """Whether ``.venv`` has distribution *name*."""
    return subprocess.run([BIN / "python", "-m", "pip", "show", name], capture_output=True, check=False).returncode == 0


def ensure_venv(*requirements: str | Path) -> None:
    """Create ``.venv`` if needed and install *requirements* into it."""
    if not (BIN / "python").exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
        sh(BIN / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    elif installed("toolflow"):
        # This checkout installed as "toolflow" before it was renamed toolflow-yaml. Both would own the
        # package and the command, so the old one goes first (removing it after would delete the command).
        sh(BIN / "python", "-m", "pip", "uninstall", "--quiet", "--yes", "toolflow")
        shutil.rmtree(ROOT / "toolflow.egg-info", ignore_errors=True)  # its metadata, which `python -m` still sees
    sh(BIN / "python", "-m", "pip", "install", "--quiet", *requirements)


def system_packages(*packages: str) -> str:
    """Install the Debian *packages* whose command (of the package's name) is not on PATH.

    Returns "" when they are all there afterwards, else the plain reason why some are missing
    (no apt-get, not root, apt-get failed), which is also printed; the tests that need them then
    skip with it. CI runs as root with apt-get, so there they run for real.
    """
    missing = [name for name in packages if shutil.which(name) is None]
    if not missing:
        return ""
    if shutil.which("apt-get") is None:
        why = "apt-get is not available"
    elif not hasattr(os, "geteuid") or os.geteuid() != 0:
        why = "installing them needs root"
    else:
        print("+ apt-get install", *missing, flush=True)
        apt = ["apt-get", "-qq", "-o", "Dpkg::Use-Pty=0"]
        code = subprocess.call([*apt, "update"]) or subprocess.call(
            [*apt, "install", "-y", "--no-install-recommends", *missing],
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
        why = f"apt-get exited with status {code}" if code else ""
    reason = f"{', '.join(missing)} not installed: {why}" if why else ""
    if reason:
        print(f"tasks.py: {reason}; the tests that need them will skip", file=sys.stderr, flush=True)
    return reason


def run() -> None:
    """The main job: lint the shipped specs, show their tools and plugins, call a few tools, run an agent loop."""
    ensure_venv("-e", ".[mcp]", *(arg for p in PLUGINS for arg in ("-e", p)))
    sh(BIN / "toolflow", "lint", "specs/")
    sh(BIN / "toolflow", "list", "specs/")
    sh(BIN / "toolflow", "plugins")
    sh(BIN / "toolflow", "call", "inspect_location", '{"detail_level": "brief"}')
    sh(BIN / "toolflow", "call", "search_object", '{"name": "sword"}')
    sh(BIN / "toolflow", "call", "say", '{"message": "Hello, traveller!"}')
    sh(BIN / "toolflow", "call", "survey_room", "{}", "--trace")  # a pipeline: its steps traced
    sh(BIN / "toolflow", "graph", "specs/")  # the tools, the pipeline's steps and depends_on, as Mermaid
    sh(BIN / "toolflow", "call", "list_directory", '{"path": "specs"}')
    # The tools of an MCP server (examples/remote/lore_server.py), imported by examples/remote/remote.yaml
    sh(BIN / "toolflow", "list", "examples/remote/")
    sh(BIN / "toolflow", "call", "--specs", "examples/remote/", "lore_lookup", '{"term": "Brannoc"}')
    sh(BIN / "toolflow", "run", "--specs", "specs/", "--model", "scripted:examples/assistant-session.yaml")
    sh(BIN / "toolflow", "test")  # the specs' examples with expect*, and tests/specs/*.toolflow.yaml


def test() -> None:
    """The whole test suite, with strict ruff and mypy.

    The house rules run as tests: tests/test_architecture.py checks the import layers and cycles,
    each function's complexity (radon, at most 15) and each module's length (at most 750 lines).
    """
    ensure_venv("-e", ".[test]", *(arg for p in PLUGINS for arg in ("-e", p)))
    # The completion tests run the scripts in real shells; they skip, saying why, where these are missing.
    os.environ["TOOLFLOW_TEST_MISSING_PACKAGES"] = system_packages("zsh", "fish")
    # The state backend's tests (issue 19) run a real Redis server; they skip, saying why, without it.
    os.environ["TOOLFLOW_TEST_MISSING_REDIS"] = system_packages("redis-server")
    # tests/test_deploy_files.py runs deploy/nginx.conf in the real nginx; it skips, saying why, without it.
    os.environ["TOOLFLOW_TEST_MISSING_NGINX"] = system_packages("nginx")
    sh(BIN / "ruff", "check", ".")
    sh(BIN / "ruff", "format", "--check", ".")
    sh(BIN / "mypy")
    sh(BIN / "python", "-m", "pytest", "-q", "tests", *(p / "tests" for p in PLUGINS if (p / "tests").is_dir()))


def docs() -> None:
    """Regenerate docs/rules.md and the field table of docs/spec-reference.md."""
    ensure_venv("-e", ".")
    sh(BIN / "python", "-m", "toolflow._docgen")


if __name__ == "__main__":
    jobs = {"run": run, "test": test, "docs": docs}
    if len(sys.argv) != 2 or sys.argv[1] not in jobs:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    jobs[sys.argv[1]]()
