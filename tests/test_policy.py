"""The agent-loop policy: parsing from spec files, category behaviour, and the continuation check."""

from __future__ import annotations

from pathlib import Path

import pytest

import toolflow
from toolflow._policy import (
    DEFAULT_CATEGORY_POLICIES,
    CategoryPolicy,
    Policy,
    TokenBudget,
    check_loop_continuation,
    token_advisory,
)


def _load(tmp_path: Path, *texts: str) -> toolflow.LoadResult:
    for index, text in enumerate(texts):
        (tmp_path / f"f{index}.yaml").write_text("toolflow: 1\n" + text, encoding="utf-8")
    result = toolflow.load_specs([tmp_path])
    assert result.ok, [d.render() for d in result.diagnostics]
    return result


def test_defaults_follow_the_seeds() -> None:
    """Without a policy: 10 iterations, 3 consecutive errors, no token budget, seed 001's categories."""
    policy = Policy()
    assert (policy.max_iterations, policy.max_consecutive_errors, policy.tokens) == (10, 3, None)
    assert policy.soft_warn_at == 8
    assert policy.category("terminal").ends(success=True)
    assert not policy.category("terminal").ends(success=False)
    assert policy.category("dangerous").per_turn == 1
    assert not policy.category("safe_chain").ends(success=True)
    assert policy.category("made_up") == CategoryPolicy()


def test_policy_from_spec_files_merges_in_load_order(tmp_path: Path) -> None:
    """Later files win key by key; categories merge category by category, over the defaults."""
    specs = _load(
        tmp_path,
        "policy:\n  max_iterations: 5\n  categories:\n    dangerous: {approval: true}\n    notify: {ends_loop: always}\n",
        "policy:\n  max_iterations: 7\n  tokens: {context_window: 1000}\n  categories:\n    notify: {per_turn: 2}\n",
    )
    policy = Policy.from_specs(specs)
    assert policy.max_iterations == 7
    assert policy.tokens == TokenBudget(context_window=1000, warning=0.6, critical=0.8)
    assert policy.category("dangerous") == CategoryPolicy(
        per_turn=1, approval=True, description=DEFAULT_CATEGORY_POLICIES["dangerous"].description
    )
    assert policy.category("notify") == CategoryPolicy(ends_loop="always", per_turn=2)


def test_background_deferred_and_on_exit_come_from_the_spec_files(tmp_path: Path) -> None:
    """Issue 21's keys: a category's ``background`` and ``deferred``, the policy's ``on_exit``, a tool's ``deferred``."""
    specs = _load(
        tmp_path,
        "policy:\n  on_exit: cancel\n  categories:\n    async_required: {background: true}\n"
        "    review: {deferred: true}\n"
        "tools:\n  ask_human:\n    description: Asks a person.\n    deferred: true\n    template: '?'\n",
    )
    policy = Policy.from_specs(specs)
    assert policy.on_exit == "cancel"
    assert policy.category("async_required").background
    assert not policy.category("async_required").deferred
    assert policy.category("review") == CategoryPolicy(deferred=True)
    assert [tool.deferred for tool in specs.tools] == [True]
    assert Policy().on_exit == "wait"
    with pytest.raises(ValueError, match="on_exit"):
        Policy(on_exit="later")  # type: ignore[arg-type]


def test_policy_errors_are_positioned_diagnostics(tmp_path: Path) -> None:
    """A wrong policy key or value is a TF1xx diagnostic with file:line:col, not an exception."""
    (tmp_path / "a.yaml").write_text("toolflow: 1\npolicy:\n  max_iterations: 0\n  colour: red\n", encoding="utf-8")
    (tmp_path / "b.yaml").write_text(
        "toolflow: 1\npolicy:\n  categories:\n    terminal: {ends_loop: sometimes}\n", encoding="utf-8"
    )
    result = toolflow.load_specs([tmp_path])
    rendered = sorted(d.render() for d in result.diagnostics)
    assert not result.ok
    assert any("a.yaml:3:19: TF104" in line for line in rendered), rendered
    assert any("a.yaml:4:3: TF101" in line and "colour" in line for line in rendered), rendered
    assert any("b.yaml:4:27: TF104" in line and "sometimes" in line for line in rendered), rendered


@pytest.mark.parametrize(
    ("used", "level"),
    [(0, None), (599, None), (600, "warning"), (799, "warning"), (800, "critical"), (5000, "critical")],
)
def test_token_advisory_levels(used: int, level: str | None) -> None:
    """Seed 001: nothing below 60 %, a warning from 60 %, critical from 80 %."""
    advisory = token_advisory(used, TokenBudget(context_window=1000))
    assert (advisory or {}).get("level") == level
    if advisory is not None:
        assert advisory["tokens_used"] == used
        assert advisory["usage_percent"] == round(used / 10, 1)


def test_no_budget_means_no_advisory() -> None:
    """Without a context window there is nothing to advise."""
    assert token_advisory(10**9, None) is None


def test_check_loop_continuation_reasons() -> None:
    """normal, token_warning, token_critical and max_iterations, with the turns left."""
    policy = Policy(max_iterations=4, tokens=TokenBudget(context_window=100))
    normal = check_loop_continuation(policy=policy, iteration=1, tokens_used=10)
    assert (normal.should_continue, normal.reason, normal.iterations_remaining) == (True, "normal", 3)
    warning = check_loop_continuation(policy=policy, iteration=2, tokens_used=65)
    assert (warning.should_continue, warning.reason) == (True, "token_warning")
    assert warning.advisory is not None
    assert warning.advisory["level"] == "warning"
    critical = check_loop_continuation(policy=policy, iteration=2, tokens_used=90)
    assert (critical.should_continue, critical.reason) == (False, "token_critical")
    last = check_loop_continuation(policy=policy, iteration=4, tokens_used=10)
    assert (last.should_continue, last.reason, last.iterations_remaining) == (False, "max_iterations", 0)
    assert set(last.to_dict()) == {"should_continue", "reason", "message", "advisory", "iterations_remaining"}


def test_critical_comes_before_the_iteration_limit() -> None:
    """On the last turn, the critical level still says `token_critical`: the model gets its answer turn."""
    policy = Policy(max_iterations=4, tokens=TokenBudget(context_window=100))
    last = check_loop_continuation(policy=policy, iteration=4, tokens_used=90)
    assert (last.should_continue, last.reason, last.iterations_remaining) == (False, "token_critical", 0)
    warned = check_loop_continuation(policy=policy, iteration=4, tokens_used=65)
    assert (warned.reason, (warned.advisory or {}).get("level")) == ("max_iterations", "warning")


def test_shipped_policy_loads() -> None:
    """The example specs' policy: a toolset, a deliberate allowlist and a token budget."""
    policy = Policy.from_specs(toolflow.load_specs([Path(__file__).parent.parent / "specs"]))
    assert policy.toolset == "game_assistant"
    assert policy.deliberate is not None
    assert "execute_command" in policy.deliberate
    assert policy.tokens is not None
    assert policy.max_iterations == 8
