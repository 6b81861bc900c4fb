"""`toolflow call` of a pipeline whose steps need approval: one question, listing the steps it covers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SPEC = """\
toolflow: 1
policy:
  categories:
    dangerous: {approval: true}
tools:
  wipe:
    description: Pretends to wipe a disk.
    category: dangerous
    parameters:
      type: object
      properties:
        disk: {type: string, description: Which disk.}
      required: [disk]
    template: "wiped {{ disk }}"
  wipe_both:
    description: Pretends to wipe two disks.
    category: dangerous
    pipeline:
      steps:
        first: {tool: wipe, with: {disk: a}}
        second: {tool: wipe, with: {disk: b}, needs: [first]}
"""


def _call(tmp_path: Path, answer: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "tools.yaml").write_text(SPEC, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "toolflow", "call", "wipe_both", "{}", "--specs", "tools.yaml", "--approve", "ask"],
        cwd=tmp_path,
        input=answer,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "TOOLFLOW_LOAD_PLUGINS": "none"},
    )


def test_one_answer_approves_the_pipeline_and_its_steps(tmp_path: Path) -> None:
    """The prompt names the steps; one `y` runs the pipeline and both steps, asked no more."""
    done = _call(tmp_path, "y\n")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("[y/N]") == 1
    assert "approve dangerous call wipe_both {} (approving its steps first (wipe), second (wipe) too)? [y/N]" in (
        done.stderr
    )
    assert json.loads(done.stdout)["data"] == {"first": "wiped a", "second": "wiped b"}


def test_a_refusal_runs_no_step(tmp_path: Path) -> None:
    """`n` refuses the pipeline: nothing runs, and the result says it was not approved."""
    done = _call(tmp_path, "n\n")
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["status"] == "denied"
    assert "was not approved" in result["error"]
