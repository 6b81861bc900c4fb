"""Durations a person types (options, environment variables, pyproject.toml): a plain number is seconds."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolflow._cli import _http_settings, _parser
from toolflow._errors import UsageError
from toolflow._model import parse_duration, parse_duration_text


@given(st.integers(min_value=1, max_value=10**9), st.integers(min_value=0, max_value=999))
def test_a_plain_number_as_text_is_seconds(whole: int, thousandths: int) -> None:
    """``"90"`` and ``"2.5"`` read as seconds, exactly as the number would."""
    text = f"{whole}.{thousandths:03d}"
    assert parse_duration_text(text) == parse_duration(float(text)) == float(text)
    assert parse_duration_text(f" {whole} ") == whole


@pytest.mark.parametrize(("text", "seconds"), [("500ms", 0.5), ("30s", 30), ("5m", 300), ("1h", 3600), (7, 7)])
def test_text_with_a_unit_and_numbers_read_as_before(text: object, seconds: float) -> None:
    assert parse_duration_text(text) == parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0", "a duration must be positive, got '0'"),
        ("0.000", "a duration must be positive, got '0.000'"),
        ("-5", "expected a duration like '500ms', '30s', '5m' or a number of seconds, got '-5'"),
        ("inf", "expected a duration like '500ms', '30s', '5m' or a number of seconds, got 'inf'"),
        ("1e3", "expected a duration like '500ms', '30s', '5m' or a number of seconds, got '1e3'"),
        ("", "expected a duration like '500ms', '30s', '5m' or a number of seconds, got ''"),
    ],
)
def test_what_is_not_a_positive_duration_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
        parse_duration_text(text)


def test_a_spec_duration_still_needs_its_unit() -> None:
    """Spec files keep to their schema: text without a unit is not a duration there."""
    with pytest.raises(ValueError, match="expected a duration"):
        parse_duration("90")


@pytest.mark.parametrize(("value", "seconds"), [("900", 900.0), ("15m", 900.0), ("2.5", 2.5)])
def test_serve_reads_a_session_idle_timeout_in_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, seconds: float
) -> None:
    """``--session-idle-timeout 900`` is 900 seconds, as its message always said; it was refused."""
    monkeypatch.chdir(tmp_path)
    args = _parser().parse_args(["serve", "--transport", "http", "--session-idle-timeout", value])
    assert _http_settings(args, stderr=None).session_idle_timeout == seconds  # type: ignore[arg-type]


def test_a_bad_session_idle_timeout_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = _parser().parse_args(["serve", "--transport", "http", "--session-idle-timeout", "0"])
    with pytest.raises(UsageError, match=r"^serve: --session-idle-timeout: a duration must be positive, got '0'$"):
        _http_settings(args, stderr=None)  # type: ignore[arg-type]
