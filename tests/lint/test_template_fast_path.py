"""The lint's fast path for simple templates gives exactly what Jinja's parser gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolflow._lint._template_facts import _analyse_tree, _simple
from toolflow._template_guards import _parsed_reads, _Scope, _simple_reads

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


GUARD_CONDITIONS = [
    *GOOD_CONDITIONS,
    "a is defined",
    "b is not defined",
    "not a is defined",
    "not c is not defined",
    "x.y is defined",
    "not d",
]
PLAIN_PARTS = st.sampled_from(
    ["{{ a }}", "{{b}}", "{{ env.HOME }}", "{{ x.y.z }}", "{{- c -}}", "{{ d }}", "{{ e }}", "text", "\n", " "] * 8
    + ["\r", "{{ a }", "{#", "{{ true }}", "{{ a | upper }}"]
)
"""Mostly what the fast path reads; now and then what it leaves to the parser."""
NAMES = st.frozensets(st.sampled_from(["a", "b", "c", "d", "e", "x", "env", "self"]))


@st.composite
def _guarded_template(draw: st.DrawFn) -> str:
    """Text, outputs and `if` blocks whose conditions test names for being defined; now and then malformed."""

    def block(depth: int) -> str:
        parts = [draw(PLAIN_PARTS) for _ in range(2)]
        if depth < 3 and draw(st.booleans()):
            parts.append(f"{{% if {draw(st.sampled_from(GUARD_CONDITIONS))} %}}{block(depth + 1)}")
            elifs = draw(st.integers(0, 2))
            parts.extend(
                f"{{% elif {draw(st.sampled_from(GUARD_CONDITIONS))} %}}{block(depth + 1)}" for _ in range(elifs)
            )
            parts.extend(f"{{% else %}}{block(depth + 1)}" for _ in range(draw(st.sampled_from([0, 1, 1, 2]))))
            if draw(st.integers(0, 9)):
                parts.append("{% endif %}")
        parts.append(draw(st.sampled_from(["", "{{ b }}", "\n{{ x.y }}", "{{ c }}"])))
        return "".join(parts)

    return block(0)


@settings(max_examples=3000, deadline=None)
@given(
    _guarded_template() | st.lists(LOOSE, max_size=10).map("".join),
    NAMES,
    st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), NAMES, max_size=2),
)
def test_the_guards_fast_path_agrees_with_the_parser(
    source: str, names: frozenset[str], implied: dict[str, frozenset[str]]
) -> None:
    """Whenever the guards' fast path answers, its unguarded reads (names and lines) are the parser walk's."""
    scope = _Scope(names, implied)
    fast = _simple_reads(source, scope)
    if fast is not None:
        assert fast == _parsed_reads(source, scope)


def test_the_guards_fast_path_answers_the_common_templates() -> None:
    """The templates most tools declare take the fast path, and their answers are the parser's."""
    scope = _Scope(frozenset({"tone", "name"}), {"tone": frozenset({"name"})})
    for source in [
        "Hello {{ name }}",
        "Hi\n{% if tone is defined %}in a {{ tone }} tone {{ name }}{% endif %}\n",
        "{% if tone is not defined %}plain{% else %}{{ tone }}{% endif %} {{ tone }}",
        "{% if not tone %}x{% elif name is defined %}{{ name }}{% endif %}",
    ]:
        fast = _simple_reads(source, scope)
        assert fast is not None, source
        assert fast == _parsed_reads(source, scope), source
