"""Graph helpers of the rules that find cycles: between tools' dependencies (TF214), between pipelines (TF229)."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

__all__ = ["chain", "components", "shortest_path"]

_LONGEST_CHAIN = 12
"""Cycles of more tools than this are shortened in messages."""


def chain(names: list[str]) -> str:
    """``a -> b -> a``; a long cycle shows its first tools and its length."""
    if len(names) <= _LONGEST_CHAIN:
        return " -> ".join(names)
    shown = [*names[: _LONGEST_CHAIN - 2], "...", names[-1]]
    return f"{' -> '.join(shown)} ({len(names) - 1} tools)"


def components(graph: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Number the strongly connected components of *graph* (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    component: dict[str, int] = {}
    number = 0
    for root in graph:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, 0)]
        while work:
            node, i = work[-1]
            successors = graph[node]
            if i < len(successors):
                work[-1] = (node, i + 1)
                successor = successors[i]
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, 0))
                elif successor in on_stack:
                    low[node] = min(low[node], index[successor])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                number += 1
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = number
                    if member == node:
                        break
    return component


def shortest_path(graph: Mapping[str, Sequence[str]], component: Mapping[str, int], start: str, end: str) -> list[str]:
    """The shortest path from *start* to *end* inside their component, both included."""
    if start == end:
        return [start]
    previous: dict[str, str] = {start: start}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for successor in graph[node]:
            if successor in previous or component[successor] != component[start]:
                continue
            previous[successor] = node
            if successor == end:
                path = [end]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return path[::-1]
            queue.append(successor)
    return [start, end]  # unreachable: both are in one component
