"""The lint's fast path for simple templates gives exactly what Jinja's parser gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolflow._lint._template_facts import _analyse_tree, _simple

EXPRESSIONS = ["{{ a }}", "{{b}}", "{{ env.HOME }}", "{{ x.y.z }}", "{{- c -}}", "{{ true }}", "{{ a | upper }}"]
FRAGMENTS = ["{%", "{#", "{{", "}}", "{", "}", "text", " ", "\n", "--flag=", "{{ a }", "{{ 1 }}", "{{ range }}", "é"]
TAGS = [
    "{% if a %}",
    "{%- if not b -%}",
    "{% if env.HOME is defined %}",
    "{% if x.y is not defined %}",
    "{%if c%}",
    "{% elif d %}",
    "{% elif e is defined %}",
    "{% else %}",
    "{%- else -%}",
    "{% endif %}",
    "{% endif -%}",
    "{% if %}",
    "{% if in %}",
    "{% if true %}",
    "{% if a and b %}",
    "{% else x %}",
    "{% endif a %}",
    "{% if self %}",
    "{% for a in b %}",
    "%}",
]
PIECES = st.sampled_from([*EXPRESSIONS, *FRAGMENTS])
LOOSE = st.sampled_from([*EXPRESSIONS, *TAGS, "text", "\n", " ", "{{ a }", "{#", "{%"])
GOOD_CONDITIONS = ["a", "not b", "env.HOME", "x.y", "c is defined", "d is not defined", "env.USER is defined", "self"]
CONDITIONS = st.sampled_from(GOOD_CONDITIONS * 4 + ["in", "true", "a == 1", "a and b"])
OPEN = st.sampled_from(["{% ", "{%- ", "{%", "{%-", "{%+ "])
CLOSE = st.sampled_from([" %}", " -%}", "%}", "-%}", " +%}"])


@st.composite
def _if_block(draw: st.DrawFn, body: st.SearchStrategy[str]) -> str:
    """An `if` block with `elif`s and maybe an `else`; sometimes left unclosed or with a second `else`."""

    def tag(text: str) -> str:
        return f"{draw(OPEN)}{text}{draw(CLOSE)}"

    parts = [tag(f"if {draw(CONDITIONS)}"), draw(body)]
    for _ in range(draw(st.integers(0, 2))):
        parts += [tag(f"elif {draw(CONDITIONS)}"), draw(body)]
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 1, 2]))):
        parts += [tag("else"), draw(body)]
    if draw(st.integers(0, 9)):
        parts.append(tag("endif"))
    return "".join(parts)


TEMPLATES = st.recursive(
    st.lists(st.sampled_from([*EXPRESSIONS, "text", "\n", " "]), max_size=3).map("".join),
    lambda inner: st.lists(inner | _if_block(inner), max_size=3).map("".join),
    max_leaves=8,
)


@settings(max_examples=2000, deadline=None)
@given(TEMPLATES | st.lists(LOOSE, max_size=10).map("".join))
def test_fast_path_agrees_with_the_parser_on_if_blocks(source: str) -> None:
    """With `{% if %}` blocks too: whenever the fast path answers, it answers what the parser does."""
    fast = _simple(source)
    if fast is not None:
        assert fast == _analyse_tree(source)


@settings(max_examples=500, deadline=None)
@given(st.lists(PIECES, max_size=8).map("".join))
def test_fast_path_agrees_with_the_parser(source: str) -> None:
    """Whenever the fast path answers, its problems, variables and env reads equal the parser's."""
    fast = _simple(source)
    if fast is not None:
        assert fast == _analyse_tree(source)


@pytest.mark.parametrize(
    "source",
    [
        "--query={{ query }}",
        "Hi {{ name }}, from {{ env.HOST }}",
        "{{-a-}}{{ b.c }}",
        "{% if a %}x{% endif %}",
        "Say {{ m }}\n{% if to is defined %}to {{ to }}{% elif all %}to all{% else %}here{% endif %}\n",
    ],
)
def test_simple_templates_take_the_fast_path(source: str) -> None:
    """Argv items and templates that print names inside plain `if` blocks are analysed without Jinja."""
    assert _simple(source) is not None


@pytest.mark.parametrize(
    "source",
    [
        "{{ true }}",
        "{{ a | upper }}",
        "{{ a }",
        "{# c #}",
        "{% if a %}x",
        "{% if a %}{% else %}{% else %}{% endif %}",
        "{% if a == 1 %}x{% endif %}",
        "{% for a in b %}{% endfor %}",
    ],
)
def test_other_templates_go_to_the_parser(source: str) -> None:
    """Constants, other statements, filters, comments, conditions beyond a name and broken syntax go to the parser."""
    assert _simple(source) is None
