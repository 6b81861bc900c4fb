"""What a user installs works: the wheels of toolflow and both plugins, built from their sdists, in a fresh venv.

The rest of the suite runs the editable checkout, which hides a module or a data file left out
of the sdist or the wheel, a dependency a plugin forgot to declare, and a plugin's requirement
that names the wrong distribution. Here ``python -m build`` makes each project's sdist and then
its wheel from that sdist, and the wheels alone are installed into a new virtual environment
(no editable install, no repository on ``sys.path``: every command runs from a temporary
directory), where ``toolflow --help``, ``toolflow lint`` (an ``http:`` tool, checked by the
plugin's kind) and ``toolflow call`` (a template tool) run as a user would run them.

Offline after the first run: the build backend is this environment's (``--no-isolation``), and
the dependencies come from a wheelhouse beside it (``<sys.prefix>/toolflow-wheelhouse``), filled
from the package index only when an install from it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

pytestmark = pytest.mark.wheels

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = {
    "toolflow-yaml": ROOT,
    "toolflow-http": ROOT / "plugins" / "toolflow-http",
    "toolflow-assistant": ROOT / "plugins" / "toolflow-assistant",
}
WHEELHOUSE = Path(sys.prefix) / "toolflow-wheelhouse"
NOT_SOURCE = (".*", "*.egg-info", "__pycache__", "build", "dist", "plugins", "tests")
"""What the copies that are built leave out: the venv, git, caches, build output, the plugins (built apart)."""
GUARD = 600  # seconds: a build or an install that hangs fails the test instead of the run

SPEC = """\
toolflow: 1
tools:
  greet:
    description: Greet someone by name.
    parameters:
      type: object
      properties:
        name: {type: string, description: Who to greet.}
      required: [name]
    template: "Hello, {{ name }}!"
  search_issues:
    description: Search the tracker's issues by text.
    parameters:
      type: object
      properties:
        q: {type: string, description: Words to look for.}
      required: [q]
    http:
      url: https://tracker.example.com/api/issues
      query: {q: "{{ q }}"}
"""


def _run(argv: Sequence[object], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=GUARD, check=False
    )


def _clean_env(prefix: Path) -> dict[str, str]:
    """The environment with *prefix*'s scripts first and nothing that points Python at the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}
    env["PATH"] = f"{prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the sdist and the wheel (built from the sdist) of each project."""
    out = tmp_path_factory.mktemp("dist")
    for name, project in PROJECTS.items():
        # A copy, so that the build's egg-info and build/ land there and not in the checkout.
        source = tmp_path_factory.mktemp("src") / name
        shutil.copytree(project, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
        result = _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, source], cwd=out)
        assert result.returncode == 0, result.stdout + result.stderr
    return out


def _install(python: Path, dist: Path, *names: str) -> None:
    """Install *names* from *dist* and the wheelhouse, filling the wheelhouse from the index if it lacks something."""
    install = [python, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", dist]
    install += ["--find-links", WHEELHOUSE, *names]
    result = _run(install, cwd=dist)
    if result.returncode != 0:  # the first run, or a new dependency: fill the wheelhouse once
        download = [python, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--dest", WHEELHOUSE]
        fetched = _run([*download, "--find-links", dist, *names], cwd=dist)
        assert fetched.returncode == 0, fetched.stdout + fetched.stderr
        for name in PROJECTS:  # ours are rebuilt each run: a copy kept there would go stale
            for stale in WHEELHOUSE.glob(f"{name.replace('-', '_')}-*"):
                stale.unlink()
        result = _run(install, cwd=dist)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def bare(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with toolflow's wheel and its dependencies: no plugin yet."""
    prefix = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True).create(prefix)
    _install(prefix / "bin" / "python", dist, "toolflow-yaml")
    return prefix


@pytest.fixture(scope="module")
def prefix(bare: Path, dist: Path) -> Path:
    """The same environment once both plugins' wheels are installed too (the tests that use it come last)."""
    _install(bare / "bin" / "python", dist, *PROJECTS)
    return bare


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder outside the repository with specs/tools.yaml."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(SPEC, encoding="utf-8")
    return tmp_path


def test_each_project_builds_an_sdist_and_a_wheel_with_its_data(dist: Path) -> None:
    """The sdists and wheels carry the distribution names, and toolflow's carry the spec schema and py.typed."""
    names = sorted(p.name for p in dist.iterdir())
    assert names == sorted(
        f"{name.replace('-', '_')}-0.1.0{suffix}" for name in PROJECTS for suffix in ("-py3-none-any.whl", ".tar.gz")
    )
    with zipfile.ZipFile(dist / "toolflow_yaml-0.1.0-py3-none-any.whl") as wheel:
        files = set(wheel.namelist())
    assert {"toolflow/data/spec-v1.schema.json", "toolflow/py.typed", "toolflow/_cli.py"} <= files
    with tarfile.open(dist / "toolflow_yaml-0.1.0.tar.gz") as sdist:
        assert "toolflow_yaml-0.1.0/toolflow/data/spec-v1.schema.json" in sdist.getnames()


def test_without_the_plugin_an_http_tool_is_an_unknown_key_that_says_so(bare: Path, project: Path) -> None:
    """With toolflow alone, TF101 on ``http:`` says a plugin may provide it and that no entry points are installed."""
    if list(bare.glob("lib/*/site-packages/toolflow_http")):
        pytest.fail("the plugins are installed already: run this module's tests in file order")
    result = _run([bare / "bin" / "toolflow", "lint"], cwd=project, env=_clean_env(bare))
    assert result.returncode == 1
    assert (
        "specs/tools.yaml:18:5: TF101 unknown key 'http' in tool 'search_issues'; a plugin may provide it as an"
        " implementation kind (installed 'toolflow' entry points: none;"
    ) in result.stdout


def test_toolflow_is_imported_from_the_new_environment(prefix: Path, tmp_path: Path) -> None:
    """toolflow and the plugins import from the venv's site-packages, as distributions of their names."""
    code = (
        "import importlib.metadata as m, json, toolflow, toolflow_http, toolflow_assistant\n"
        "print(json.dumps([toolflow.__file__, toolflow_http.__file__, toolflow_assistant.__file__,"
        " m.version('toolflow-yaml'), toolflow.__version__]))"
    )
    result = _run([prefix / "bin" / "python", "-c", code], cwd=tmp_path, env=_clean_env(prefix))
    assert result.returncode == 0, result.stderr
    *files, version, import_version = json.loads(result.stdout)
    for file in files:
        assert Path(file).resolve().is_relative_to(prefix.resolve()), file
    assert version == import_version == "0.1.0"


def test_help_runs_from_the_installed_script(prefix: Path, tmp_path: Path) -> None:
    """``toolflow --help`` runs and lists the commands."""
    result = _run([prefix / "bin" / "toolflow", "--help"], cwd=tmp_path, env=_clean_env(prefix))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: toolflow")
    assert "lint" in result.stdout


def test_lint_checks_an_http_tool_through_the_installed_plugin(prefix: Path, project: Path) -> None:
    """``toolflow lint`` knows the http kind from the installed plugin, and its schema finds a bad value."""
    env = _clean_env(prefix)
    result = _run([prefix / "bin" / "toolflow", "lint"], cwd=project, env=env)
    assert (result.returncode, result.stderr) == (0, ""), result.stdout
    assert result.stdout.startswith("All checks passed")
    spec = project / "specs" / "tools.yaml"
    spec.write_text(SPEC.replace("      url: https://", "      method: FETCH\n      url: https://"), encoding="utf-8")
    result = _run([prefix / "bin" / "toolflow", "lint"], cwd=project, env=env)
    assert result.returncode == 1
    assert "specs/tools.yaml:19:15: TF104 'method' in 'http' of tool 'search_issues' must be one of" in result.stdout


def test_call_runs_a_template_tool(prefix: Path, project: Path) -> None:
    """``toolflow call`` renders a template tool in the installed engine."""
    argv = [prefix / "bin" / "toolflow", "call", "greet", '{"name": "Ada"}']
    result = _run(argv, cwd=project, env=_clean_env(prefix))
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout) == {"success": True, "data": "Hello, Ada!"}


def test_plugins_lists_both_plugins_by_their_distributions(prefix: Path, tmp_path: Path) -> None:
    """``toolflow plugins`` finds both plugins' entry points, with their distribution names."""
    argv = [prefix / "bin" / "toolflow", "plugins", "--strict", "--json"]
    result = _run(argv, cwd=tmp_path, env=_clean_env(prefix))
    assert result.returncode == 0, result.stderr
    rows = {p["name"]: (p["distribution"], p["status"]) for p in json.loads(result.stdout)["plugins"]}
    assert rows["http"] == ("toolflow-http", "loaded")
    assert rows["assistant"] == ("toolflow-assistant", "loaded")
    assert rows["toolflow.default_plugins.template"] == ("toolflow-yaml", "loaded")
