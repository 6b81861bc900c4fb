"""What the agent loop does with the calls of each category (:class:`CategoryPolicy`), and the built-in defaults.

The defaults (:data:`DEFAULT_CATEGORY_POLICIES`):

============== ============ ======== ========
category       ends_loop    per_turn approval
============== ============ ======== ========
safe_chain     never        —        no
terminal       on_success   —        no
dangerous      never        1        no
async_required never        —        no
other          never        —        no
============== ============ ======== ========

The runtime policy (``toolflow._policy.Policy``) merges a project's ``policy: categories:`` over
them, and lint (TF233, TF248, TF256, TF258) reads them to check what the files set, without
loading the runtime policy. This module is part of the model layer: pure data, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

import attrs

from toolflow._errors import expect, expect_count
from toolflow._model import Category

__all__ = [
    "CATEGORY_KEYS",
    "DEFAULT_CATEGORY_POLICIES",
    "OTHER_CATEGORY",
    "CategoryPolicy",
    "EndsLoop",
    "merge_categories",
]

EndsLoop: TypeAlias = Literal["never", "on_success", "always"]


@attrs.frozen(kw_only=True)
class CategoryPolicy:
    """What the loop does with calls of one category.

    Attributes:
        ends_loop: ``never`` (chain on), ``on_success`` (a successful call ends the loop; a
            failed one does not) or ``always``.
        per_turn: At most this many calls of the category run per turn; ``None``: no limit.
        approval: Whether each call must be approved before it runs.
        description: What the category is for.
        background: In the agent loop, calls run in the background: the model is answered at
            once with a ``started`` result and a task id, and the outcome reaches it at a later
            turn boundary (``toolflow call``, ``invoke`` and pipeline steps run them in the
            foreground).
        deferred: The agent loop does not run the calls: the run ends with ``deferred`` and the
            calls wait in its saved state for results supplied on resume.
    """

    ends_loop: EndsLoop = "never"
    per_turn: int | None = None
    approval: bool = False
    description: str = ""
    background: bool = False
    deferred: bool = False

    def __attrs_post_init__(self) -> None:
        if self.ends_loop not in ("never", "on_success", "always"):
            msg = f"CategoryPolicy: ends_loop must be 'never', 'on_success' or 'always', got {self.ends_loop!r}"
            raise ValueError(msg)
        expect_count(self.per_turn, "CategoryPolicy: per_turn", minimum=1, optional=True)
        expect(self.approval, bool, "CategoryPolicy: approval", "True or False")
        expect(self.background, bool, "CategoryPolicy: background", "True or False")
        expect(self.deferred, bool, "CategoryPolicy: deferred", "True or False")
        expect(self.description, str, "CategoryPolicy: description", "a string")

    def ends(self, *, success: bool) -> bool:
        """Whether a call of this category that did (not) succeed ends the loop."""
        return self.ends_loop == "always" or (self.ends_loop == "on_success" and success)


DEFAULT_CATEGORY_POLICIES: Mapping[str, CategoryPolicy] = MappingProxyType(
    {
        Category.SAFE_CHAIN.value: CategoryPolicy(description="Read-only or low-risk; chains freely."),
        Category.TERMINAL.value: CategoryPolicy(ends_loop="on_success", description="Communicates; ends the loop."),
        Category.DANGEROUS.value: CategoryPolicy(per_turn=1, description="Changes state; one per turn."),
        Category.ASYNC_REQUIRED.value: CategoryPolicy(description="External or long-running; the loop continues."),
    }
)
"""Seeds 000 and 001's behaviour of the built-in categories."""

OTHER_CATEGORY = CategoryPolicy()
"""The behaviour of a category nobody describes: it chains on without limits."""

CATEGORY_KEYS = ("ends_loop", "per_turn", "approval", "description", "background", "deferred")
"""The keys of a ``policy: categories:`` entry, the fields of :class:`CategoryPolicy`."""


def merge_categories(base: Mapping[str, CategoryPolicy], declared: Mapping[str, Any]) -> Mapping[str, CategoryPolicy]:
    """*base* with each entry of *declared* (a schema-valid ``policy: categories:`` mapping) over it, key by key.

    A category that *base* does not describe starts from :data:`OTHER_CATEGORY`.

    Raises:
        ValueError, TypeError: A value is not one a :class:`CategoryPolicy` takes.
    """
    categories = dict(base)
    for name, settings in declared.items():
        own = settings if isinstance(settings, Mapping) else {}
        fields = {key: own[key] for key in CATEGORY_KEYS if key in own}
        categories[str(name)] = attrs.evolve(categories.get(str(name), OTHER_CATEGORY), **fields)
    return MappingProxyType(categories)
