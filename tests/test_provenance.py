"""The record of values from ``${VAR}``: ``toolflow.Interpolated``, ``masked``, ``plain`` and ``Redactor``."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path

import yaml

from toolflow._loader import load_specs
from toolflow._provenance import Interpolated, Redactor, iter_interpolated, masked, plain
from toolflow._yaml import convert

SECRET = "tf-s3cret-Value-0123456789"
ENVIRONMENT = {"TF_SECRET": SECRET, "TF_SHORT": "xq7"}
SPECS = """\
toolflow: 1
policy:
  system_prompt: "You help ${TF_SECRET}"
tools:
  lookup:
    description: "Look things up for ${TF_SECRET}"
    parameters:
      type: object
      properties:
        space:
          type: string
          description: The space
          enum: [public, "${TF_SECRET}", "${TF_SHORT}"]
        token:
          type: string
          description: The account
          default: "${TF_SECRET}"
    template: "{{ space }}"
"""


def test_the_loader_records_where_each_value_came_from(tmp_path: Path) -> None:
    """Interpolated strings equal their values, show their references, and are listed with their pointers."""
    (tmp_path / "s.yaml").write_text(SPECS, encoding="utf-8")
    loaded = load_specs([tmp_path], environ=ENVIRONMENT)
    assert loaded.ok, loaded.diagnostics
    lookup = loaded.tools[0]
    assert lookup.description == f"Look things up for {SECRET}"
    assert type(lookup.description) is Interpolated
    assert repr(lookup.description) == repr("Look things up for ${TF_SECRET}")
    assert lookup.description.substitutions == (("${TF_SECRET}", SECRET),)
    pointers = [pointer for pointer, _ in lookup.interpolated]
    assert "/tools/lookup/parameters/properties/space/enum/1" in pointers
    assert "/tools/lookup/parameters/properties/token/default" in pointers
    assert all(p.startswith("/tools/lookup/") for p in pointers)
    assert ("/policy/system_prompt", "You help ${TF_SECRET}") in [
        (p, s.reference) for p, s in loaded.files[0].interpolated
    ]
    assert SECRET not in repr(lookup)


def test_the_mark_survives_copies_and_pickles() -> None:
    """Deep copies and pickles keep the mark; building a new string drops it."""
    marked = Interpolated(SECRET, reference="${TF_SECRET}", substitutions=(("${TF_SECRET}", SECRET),))
    assert copy.deepcopy({"a": [marked]})["a"][0].reference == "${TF_SECRET}"
    assert pickle.loads(pickle.dumps(marked)).substitutions == marked.substitutions
    assert type(marked + "") is str
    assert str(marked) == SECRET
    assert f"{marked}" == SECRET
    assert json.dumps(marked) == json.dumps(SECRET)
    assert masked({"k": (marked, 1)}) == {"k": ("${TF_SECRET}", 1)}
    assert type(plain([marked])[0]) is str


def test_a_default_is_unset_or_falls_back_without_a_secret() -> None:
    """``${VAR:-default}`` using its default, and an unset variable, took nothing from the environment."""
    root = yaml.compose('a: "${TF_UNSET_ONE:-fallback-value}"\nb: "x${TF_UNSET_TWO}"\nc: "$${TF_SECRET}"\n')
    assert root is not None

    data, _ = convert(root, lambda *a, **k: None, environ={})
    assert data["a"].substitutions == ()
    assert data["a"].reference == "${TF_UNSET_ONE:-fallback-value}"
    assert data["b"].substitutions == ()
    assert type(data["c"]) is str  # an escape replaces nothing from the environment


def test_the_redactor_masks_quoted_and_encoded_forms() -> None:
    """Free text is masked in the forms messages quote values in; short values are left alone there."""
    tricky = 'a"b\\c/é d+e=f'
    marked = Interpolated(tricky, reference="${K}", substitutions=(("${K}", tricky), ("${S}", "ab")))
    redact = Redactor([marked])
    assert redact(f"raw {tricky} json {json.dumps(tricky)} repr {tricky!r}") == "raw ${K} json \"${K}\" repr '${K}'"
    assert redact("url http://h/a%22b%5Cc/%C3%A9%20d%2Be%3Df") == "url http://h/${K}"
    assert redact("ab stays") == "ab stays"
    assert not Redactor([])


def test_marks_lead_to_every_string_also_through_aliases() -> None:
    """The walks that skip unmarked containers find what full walks find, aliases and all."""
    text = (
        'shared: &s {k: "${TF_SECRET}", n: [1, "${TF_SHORT}"]}\n'
        "again: *s\n"
        "deep: [[{x: *s}], plain]\n"
        'plain: {a: 1, b: "no $ here", c: "$${TF_SECRET}"}\n'
    )
    root = yaml.compose(text)
    assert root is not None
    marks: set[int] = set()
    data, _ = convert(root, lambda *a, **k: None, environ=ENVIRONMENT, marks=marks)
    found = list(iter_interpolated(data))
    assert [pointer for pointer, _ in found] == [
        "/shared/k",
        "/shared/n/1",
        "/again/k",
        "/again/n/1",
        "/deep/0/0/x/k",
        "/deep/0/0/x/n/1",
    ]
    assert list(iter_interpolated(data, within=marks)) == found
    assert plain(data, within=marks) == plain(data) == json.loads(json.dumps(data))
    assert plain(data, within=marks)["plain"] is data["plain"]  # nothing to copy there
    assert id(data["plain"]) not in marks
