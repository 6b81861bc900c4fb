"""The project's ``[tool.toolflow]`` settings: where the specs are, which local plugins to load.

::

    [tool.toolflow]
    specs = ["specs"]              # default spec paths, relative to pyproject.toml
    plugins = ["myproject.tools"]  # local, unpackaged plugin modules, importable from the project root
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import attrs

from toolflow._errors import ConfigError

__all__ = ["DEFAULT_SPECS", "ProjectConfig", "find_pyproject", "load_project", "read_pyproject"]

DEFAULT_SPECS = "specs"


@attrs.frozen(kw_only=True)
class ProjectConfig:
    """``[tool.toolflow]`` of the nearest pyproject.toml (or the defaults when there is none).

    Attributes:
        root: The directory of pyproject.toml (the working directory without one).
        pyproject: The file read, if any.
        specs: Spec paths, relative to the working directory.
        plugins: Module names of local plugins.
    """

    root: str = "."
    pyproject: str | None = None
    specs: tuple[str, ...] = (DEFAULT_SPECS,)
    plugins: tuple[str, ...] = ()


def find_pyproject(start: str | os.PathLike[str] = ".") -> Path | None:
    """Return the nearest ``pyproject.toml`` at or above *start*, if any."""
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def read_pyproject(pyproject: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a pyproject.toml.

    Raises:
        ConfigError: The file cannot be read or is not valid TOML.
    """
    where = os.fspath(pyproject)
    try:
        with open(pyproject, "rb") as stream:
            return tomllib.load(stream)
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", path=where) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", path=where) from None


def load_project(start: str | os.PathLike[str] = ".") -> ProjectConfig:
    """Read ``[tool.toolflow]`` from the nearest pyproject.toml at or above *start*.

    Raises:
        ConfigError: The file is not valid TOML, or ``specs``/``plugins`` are not lists of strings.
    """
    pyproject = find_pyproject(start)
    if pyproject is None:
        return ProjectConfig()
    where = os.fspath(pyproject)
    table: object = read_pyproject(pyproject)
    for key in ("tool", "toolflow"):
        table = table.get(key, {}) if isinstance(table, dict) else table
    if not isinstance(table, dict):
        raise ConfigError("[tool] and [tool.toolflow] must be tables", path=where)

    def strings(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = table.get(key)
        if value is None:
            return default
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"[tool.toolflow] {key} must be a list of strings", path=where)
        return tuple(value)

    root = pyproject.parent
    specs = strings("specs", ())
    return ProjectConfig(
        root=os.fspath(root),
        pyproject=where,
        specs=tuple(os.path.relpath(root / s) for s in specs) if specs else (DEFAULT_SPECS,),
        plugins=strings("plugins", ()),
    )
