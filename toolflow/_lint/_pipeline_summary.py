"""The summary of a tool's pipeline, for the rules that need every file (see ``_summary``).

Kept apart from ``_summary`` so that Jinja2 is imported only when some tool has a pipeline.
"""

from __future__ import annotations

from toolflow._diagnostics import Span
from toolflow._lint._pipeline_facts import PipelineString, Read, pipeline_strings, read_span
from toolflow._lint._summary import FieldRead, Named, PipelineSummary, Place, StepSummary
from toolflow._model import PipelineStep, ToolSpec
from toolflow._schemas import json_pointer

__all__ = ["summarize_pipeline"]


def summarize_pipeline(tool: ToolSpec, text: str) -> PipelineSummary:
    """What the rules that need every file know of *tool*'s pipeline (*text*: its file's text)."""
    pipeline = tool.pipeline
    assert pipeline is not None
    strings = pipeline_strings(tool)
    names = [step.name for step in pipeline.steps]
    steps = []
    for index, step in enumerate(pipeline.steps):
        own = [s for s in strings if s.step == step.name]
        steps.append(_step(tool, text, step, own, names[:index]))
    result = [s for s in strings if s.step is None]
    category = f"{tool.pointer}/category"
    located = tool.locator is not None and tool.locator.locate(category) != tool.locator.locate(tool.pointer)
    return PipelineSummary(
        steps=tuple(steps),
        result_reads=tuple(_field_reads(tool, text, result)),
        category_place=Place.of(tool.file, tool.locator, category if located else tool.pointer, key=not located),
    )


def _step(
    tool: ToolSpec, text: str, step: PipelineStep, strings: list[PipelineString], earlier: list[str]
) -> StepSummary:
    place = Place.of(tool.file, tool.locator, step.pointer, key=True)
    arguments = step.arguments if isinstance(step.arguments, dict) else {}
    has_with = tool.locator is not None and tool.locator.locate(f"{step.pointer}/with") != tool.locator.locate(
        step.pointer
    )
    for_each = next((s for s in strings if s.key == "for_each"), None)
    chain = None
    if for_each is not None and for_each.chain is not None and for_each.chain.root == "steps":
        chain = _field_read(tool, text, for_each, for_each.chain)
    return StepSummary(
        name=step.name,
        tool=step.tool,
        place=place,
        tool_place=Place.of(tool.file, tool.locator, f"{step.pointer}/tool"),
        arguments=tuple(
            Named(
                name=str(key),
                place=Place.of(tool.file, tool.locator, f"{step.pointer}/with{json_pointer([str(key)])}", key=True),
            )
            for key in arguments
        ),
        arguments_place=Place.of(
            tool.file, tool.locator, f"{step.pointer}/with" if has_with else step.pointer, key=True
        ),
        reads=tuple(_field_reads(tool, text, strings)),
        for_each=chain,
        repeated=step.for_each is not None,
        waits_for=_waits_for(step, strings, earlier),
        conditional=step.when is not None,
    )


def _waits_for(step: PipelineStep, strings: list[PipelineString], earlier: list[str]) -> tuple[str, ...]:
    """The earlier steps *step* waits for: those it reads or needs; all of them when it picks one at run time."""
    reads = [read.step for string in strings for read in string.reads]
    if None in reads:
        return tuple(earlier)
    waits = {*step.needs, *reads}
    return tuple(name for name in earlier if name in waits)


def _field_reads(tool: ToolSpec, text: str, strings: list[PipelineString]) -> list[FieldRead]:
    """The reads of ``steps`` in *strings* that follow a field or an index of the step's data."""
    return [
        _field_read(tool, text, string, read)
        for string in strings
        for read in string.reads
        if read.root == "steps" and read.step is not None and read.path
    ]


def _field_read(tool: ToolSpec, text: str, string: PipelineString, read: Read) -> FieldRead:
    assert read.step is not None
    whole = Place.of(tool.file, tool.locator, string.pointer)
    places = []
    for upto in range(len(read.path) + 1):
        span: Span | None = read_span(text, tool, string, read, upto)
        places.append(whole if span is None else Place.at(tool.file, string.pointer, span))
    return FieldRead(step=read.step, path=read.path, places=tuple(places))
