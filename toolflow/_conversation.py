"""A conversation's bookkeeping in its stored document: read it, and merge one segment's work into it (issue 19).

A conversation (a 2026-07-28 client's handle chain, a fleet's 2025-11-25 session) is served in
*segments*: each request opens an engine with ``open_engine(conversation=...)``, which restores
the gates from the stored document when it begins and commits what its calls did when it ends
(:class:`toolflow._store_access.ConversationSegment`). Segments of one conversation can run at
the same time on different replicas, so a commit never overwrites: it reads the document again,
adds this segment's *delta* (what changed between the state it began from and the state it ends
with) and stores the result naming the version it read (compare-and-set), retrying on a lost race.

The stored document is a JSON object shared by several parts of ``toolflow serve``; this module
owns its key ``"conversation"`` and keeps every other top-level key as it found it::

    {"conversation": {"v": 1, "turns": 3, "gates": <toolflow._gates.Gates.dump()>}, "session": ...}

How a delta merges (pure functions, so that property tests can interleave segments freely):

- sets (the tools that succeeded, for ``depends_on`` and the rules' ``before_exit``) are unions:
  successes only grow, so ``depends_on`` is never loosened by a merge;
- counts (the rules' ``per_run`` counts, the turns) add the segment's increase to the larger of
  the stored count and the count the segment began from: two segments' increases both count,
  whichever commits first, and a document that expired while a long segment ran gets the
  segment's whole count back rather than its increase alone;
- the rules' ``per_turn`` counts are not kept: a segment is a turn of its own (serve: one
  request is one turn), so it begins with none;
- the rules' last call (``after`` rules) is the committing segment's when it made a call, else
  the stored one: of two segments that ran at once, either may be the last.

This module is in the registry layer beside :mod:`toolflow._state`: no trio, no I/O. The shape of
the gates' document is :mod:`toolflow._gates_document`'s, which saved runs check too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolflow._gates_document import gates_ok

__all__ = ["DEFAULT_TTL", "FORMAT", "KEY", "empty_part", "merged", "part_of"]

DEFAULT_TTL = 30 * 60.0
"""Seconds a conversation's state lives after its last request (serve: its ``session_idle_timeout``)."""

KEY = "conversation"
"""The top-level key of the stored document that holds the conversation's bookkeeping."""

FORMAT = 1
"""The ``"v"`` of the part this module writes; a part of another version is read as none (a fresh start)."""

_EMPTY_RULES: dict[str, Any] = {"turn_calls": {}, "run_calls": {}, "last": None, "called": False, "succeeded": []}


def empty_part() -> dict[str, Any]:
    """The part of a conversation that nothing was stored for: no turns, no gates' state."""
    return {"v": FORMAT, "turns": 0, "gates": None}


def part_of(data: Mapping[str, Any]) -> dict[str, Any]:
    """The conversation's part of the stored document *data*, checked; :func:`empty_part` if absent or malformed.

    The store is the fleet's, but a damaged or foreign part must not fail a call: it is read as
    nothing stored, which fails closed (a ``depends_on`` dependency must run again). Its gates
    are checked as a saved run's are (:func:`toolflow._gates_document.gates_ok`).
    """
    part = data.get(KEY)
    if not isinstance(part, Mapping) or part.get("v") != FORMAT:
        return empty_part()
    turns, gates = part.get("turns"), part.get("gates")
    if not _count(turns) or not (gates is None or gates_ok(gates)):
        return empty_part()
    return {"v": FORMAT, "turns": turns, "gates": gates}


def merged(data: Mapping[str, Any], before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The stored document *data* with a segment's work added: it began from part *before* and ends with *after*.

    *before* and *after* are parts (``{"turns": n, "gates": Gates.dump() or None}``); the other
    top-level keys of *data* are kept untouched. See the module's docstring for how each field merges.
    """
    stored = part_of(data)
    gates = _merge_gates(stored["gates"], before.get("gates"), after.get("gates"))
    turns = _grown(stored["turns"], before.get("turns", 0), after.get("turns", 0))
    return {**data, KEY: {"v": FORMAT, "turns": turns, "gates": gates}}


# --------------------------------------------------------------------------- merging


def _grown(stored: int, before: int, after: int) -> int:
    """A count: the larger of the stored one and the one the segment began from, plus the segment's increase."""
    return max(stored, before) + max(0, after - before)


def _merge_gates(stored: Any, before: Any, after: Any) -> Any:
    if after is None:  # the segment kept no gates' state: the stored one stays
        return stored
    stored = stored or {"rules": None, "succeeded_loop": [], "succeeded_session": []}
    before = before or {"rules": None, "succeeded_loop": [], "succeeded_session": []}
    return {
        "rules": _merge_rules(stored["rules"], before["rules"], after["rules"]),
        "succeeded_loop": sorted({*stored["succeeded_loop"], *after["succeeded_loop"]}),
        "succeeded_session": sorted({*stored["succeeded_session"], *after["succeeded_session"]}),
    }


def _merge_rules(stored: Any, before: Any, after: Any) -> Any:
    if after is None:  # the segment's policy has no rules: the stored counts stay
        return stored
    stored, before = stored or _EMPTY_RULES, before or _EMPTY_RULES
    names = {*stored["run_calls"], *after["run_calls"]}
    grew = {name: after["run_calls"].get(name, 0) - before["run_calls"].get(name, 0) for name in names}
    run_calls = {
        name: _grown(
            stored["run_calls"].get(name, 0), before["run_calls"].get(name, 0), after["run_calls"].get(name, 0)
        )
        for name in sorted(names)
    }
    called_now = any(increase > 0 for increase in grew.values())
    return {
        "turn_calls": {},  # a segment is a turn of its own
        "run_calls": {name: count for name, count in run_calls.items() if count},
        "last": after["last"] if called_now else stored["last"],
        "called": bool(stored["called"] or after["called"]),
        "succeeded": sorted({*stored["succeeded"], *after["succeeded"]}),
    }


# --------------------------------------------------------------------------- checking


def _count(value: object) -> bool:
    return type(value) is int and value >= 0
