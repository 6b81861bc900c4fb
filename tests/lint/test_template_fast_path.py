"""The lint's fast path for simple templates gives exactly what Jinja's parser gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolflow._lint._template_facts import _analyse_tree, _simple

EXPRESSIONS = ["{{ a }}", "{{b}}", "{{ env.HOME }}", "{{ x.y.z }}", "{{- c -}}", "{{ true }}", "{{ a | upper }}"]
FRAGMENTS = ["{%", "{#", "{{", "}}", "{", "}", "text", " ", "\n", "--flag=", "{{ a }", "{{ 1 }}", "{{ range }}", "é"]
PIECES = st.sampled_from([*EXPRESSIONS, *FRAGMENTS])


@settings(max_examples=500, deadline=None)
@given(st.lists(PIECES, max_size=8).map("".join))
def test_fast_path_agrees_with_the_parser(source: str) -> None:
    """Whenever the fast path answers, its problems, variables and env reads equal the parser's."""
    fast = _simple(source)
    if fast is not None:
        assert fast == _analyse_tree(source)


@pytest.mark.parametrize("source", ["--query={{ query }}", "Hi {{ name }}, from {{ env.HOST }}", "{{-a-}}{{ b.c }}"])
def test_simple_templates_take_the_fast_path(source: str) -> None:
    """Argv items and one-line templates that only print names are analysed without Jinja."""
    assert _simple(source) is not None


@pytest.mark.parametrize("source", ["{{ true }}", "{% if a %}x{% endif %}", "{{ a | upper }}", "{{ a }", "{# c #}"])
def test_other_templates_go_to_the_parser(source: str) -> None:
    """Constants, statements, filters, comments and broken syntax are left to Jinja's parser."""
    assert _simple(source) is None
