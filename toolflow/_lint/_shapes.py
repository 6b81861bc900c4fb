"""Following a read of a step's data (``steps.order.items[0]``) through its tool's output shape.

TF232 reports a field the shape says is not there; TF234 a ``for_each`` over a value the shape
says is not a list. Both follow a :class:`~toolflow._lint._summary.FieldRead` the same way.
"""

from __future__ import annotations

import attrs

from toolflow._lint._summary import FieldRead, PipelineSummary, ProjectSummary, Shape, StepSummary, ToolSummary

__all__ = ["Followed", "follow", "read_target", "shown"]


@attrs.frozen(kw_only=True)
class Followed:
    """Where following a path ended.

    Attributes:
        shape: The shape at the end of the path; ``None`` when the output schema stops saying
            (an open object, a ``$ref``, a combinator) or the path stopped at a wrong part.
        wrong: The index in the path of a part the shape says cannot be there, else ``None``.
        within: At a wrong part, the shape it was read from.
    """

    shape: Shape | None
    wrong: int | None = None
    within: Shape | None = None


def read_target(
    summary: ProjectSummary, pipeline: PipelineSummary, read: FieldRead
) -> tuple[StepSummary, ToolSummary, Shape] | None:
    """The step *read* reads, its tool, and the tool's output shape; ``None`` when any is not known."""
    step = pipeline.step(read.step)
    if step is None:
        return None  # TF228 reports it
    tools = summary.tools_by_name.get(step.tool, ())
    if len(tools) != 1 or tools[0].output is None:
        return None
    return step, tools[0], tools[0].output


def follow(shape: Shape, path: tuple[str | int, ...], *, repeated: bool) -> Followed:
    """Follow *path* from a step's data of *shape* (a list of such, when the step is *repeated*)."""
    node: Shape | None = shape
    if repeated:
        if not path:
            return Followed(shape=Shape(types=("array",), items=shape))
        if not isinstance(path[0], int):
            return Followed(shape=None)  # a list's method or attribute: not a field of the results
        path = path[1:]
        offset = 1
    else:
        offset = 0
    for index, part in enumerate(path):
        assert node is not None
        if isinstance(part, int):
            node = node.items
        elif node.properties is not None:
            if part not in node.properties:
                return Followed(shape=None, wrong=index + offset, within=node)
            node = node.properties[part]
        elif node.types and "object" not in node.types:
            return Followed(shape=None, wrong=index + offset, within=node)
        else:
            node = None
        if node is None:
            return Followed(shape=None)
    return Followed(shape=node)


def shown(step: str, path: tuple[str | int, ...]) -> str:
    """How messages write a read: ``steps.order.items[0].sku``."""
    return f"steps.{step}" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)
