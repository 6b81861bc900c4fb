"""A pipeline compiled for running: its templated values compiled, and what each step waits for.

:func:`compile_pipeline` turns the :class:`~toolflow.Pipeline` of a tool into a
:class:`CompiledPipeline`, or the problems that keep it from running (a template that does not
compile, a step that reads an unknown, a later or its own step). :func:`pipeline_cycles` finds
pipelines that call themselves through their steps. :meth:`toolflow.Registry.build` reports both
(``toolflow lint`` points at them first); the engine runs what this module compiles
(``toolflow._pipelines``).

A step waits for the steps its templates read (``steps.NAME``, ``errors.NAME``) and those its
``needs`` lists; a template that picks a step at run time (``steps[name]``) waits for every
earlier step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

import attrs

from toolflow._model import Pipeline, PipelineStep, ToolSpec
from toolflow._template_values import CompiledValue, compile_value, references

__all__ = ["CompiledPipeline", "CompiledStep", "compile_pipeline", "covered_steps", "pipeline_cycles"]


@attrs.frozen(kw_only=True)
class CompiledStep:
    """One step, ready to run."""

    step: PipelineStep
    name: str
    tool: str
    arguments: CompiledValue
    when: CompiledValue | None
    for_each: CompiledValue | None
    waits_for: tuple[str, ...]
    """The earlier steps that must finish first, in the pipeline's order."""


@attrs.frozen(kw_only=True)
class CompiledPipeline:
    """A tool's pipeline, ready to run: its steps in the spec's order and its result."""

    steps: tuple[CompiledStep, ...]
    result: CompiledValue | None
    """The ``result:`` value; ``None``: the result is every step's data, by step name."""

    @property
    def tools(self) -> frozenset[str]:
        """The tools the steps call."""
        return frozenset(step.tool for step in self.steps)


def compile_pipeline(pipeline: Pipeline) -> CompiledPipeline | list[tuple[str, str]]:
    """Compile *pipeline*; return it, or its problems as ``(JSON pointer, message)`` pairs."""
    problems: list[tuple[str, str]] = []
    steps: list[CompiledStep] = []
    earlier: list[str] = []
    names = [step.name for step in pipeline.steps]
    for step in pipeline.steps:
        compiled = _compile_step(step, earlier, names, problems)
        if compiled is not None:
            steps.append(compiled)
        earlier.append(step.name)
    result = None
    if pipeline.has_result:
        value = compile_value(pipeline.result, f"{pipeline.pointer}/result")
        if isinstance(value, tuple):
            problems.append((value[0], f"the template does not compile: {value[1].message}"))
        else:
            result = value
            problems.extend(_unknown_steps(pipeline.result, names, f"{pipeline.pointer}/result"))
    if problems:
        return problems
    return CompiledPipeline(steps=tuple(steps), result=result)


def _compile_step(
    step: PipelineStep, earlier: list[str], names: list[str], problems: list[tuple[str, str]]
) -> CompiledStep | None:
    values: dict[str, CompiledValue | None] = {}
    for key, raw in (("with", step.arguments), ("when", step.when), ("for_each", step.for_each)):
        if raw is None:
            values[key] = None
            continue
        value = compile_value(raw, f"{step.pointer}/{key}")
        if isinstance(value, tuple):
            problems.append((value[0], f"step {step.name!r}: the template does not compile: {value[1].message}"))
            return None
        values[key] = value
    read: set[str] = set()
    dynamic = False
    for key, raw in (("with", step.arguments), ("when", step.when), ("for_each", step.for_each)):
        _, steps, picks = references(raw)
        dynamic = dynamic or picks
        for name in sorted(steps):
            problem = _reference_problem(step, name, earlier, names)
            if problem is not None:
                problems.append((f"{step.pointer}/{key}", problem))
            else:
                read.add(name)
    for index, name in enumerate(step.needs):
        problem = _reference_problem(step, name, earlier, names, verb="needs")
        if problem is not None:
            problems.append((f"{step.pointer}/needs/{index}", problem))
        else:
            read.add(name)
    waits_for = tuple(earlier) if dynamic else tuple(name for name in earlier if name in read)
    arguments = values["with"]
    return CompiledStep(
        step=step,
        name=step.name,
        tool=step.tool,
        arguments=arguments if arguments is not None else compile_value({}),  # type: ignore[arg-type]
        when=values["when"],
        for_each=values["for_each"],
        waits_for=waits_for,
    )


def _reference_problem(
    step: PipelineStep, name: str, earlier: list[str], names: list[str], verb: str = "reads"
) -> str | None:
    if name in earlier:
        return None
    if name == step.name:
        return f"step {step.name!r} {verb} itself"
    if name in names:
        return f"step {step.name!r} {verb} step {name!r}, which comes later: steps run in the order written"
    return f"step {step.name!r} {verb} step {name!r}, which the pipeline does not have"


def _unknown_steps(value: object, names: list[str], pointer: str) -> Iterator[tuple[str, str]]:
    _, steps, _ = references(value)
    for name in sorted(steps - set(names)):
        yield pointer, f"the result reads step {name!r}, which the pipeline does not have"


def pipeline_cycles(specs: Iterable[ToolSpec]) -> list[list[str]]:
    """The cycles of pipelines calling pipelines through their steps: each as the tools around it, first repeated."""
    calls: Mapping[str, list[str]] = {
        spec.name: [step.tool for step in pipeline.steps] for spec in specs if (pipeline := spec.pipeline) is not None
    }
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in calls:
        if root in state:
            continue
        # Depth first without recursion (a long chain of pipelines must not exhaust the stack).
        path: list[str] = [root]
        pending: list[Iterator[str]] = [iter(dict.fromkeys(calls[root]))]
        state[root] = 1
        while pending:
            callee = next(pending[-1], None)
            if callee is None:
                state[path.pop()] = 2
                pending.pop()
            elif callee in calls and state.get(callee) == 1:
                cycles.append([*path[path.index(callee) :], callee])
            elif callee in calls and callee not in state:
                state[callee] = 1
                path.append(callee)
                pending.append(iter(dict.fromkeys(calls[callee])))
    return cycles


def covered_steps(
    pipeline: CompiledPipeline,
    pipeline_of: Callable[[str], CompiledPipeline | None],
    needs_approval: Callable[[str], bool],
) -> list[tuple[str, str]]:
    """The steps that an approval of a *pipeline* call covers, as ``(step, tool)``.

    Each step whose tool needs approval and that runs whatever happens (no ``when:``), and,
    through such steps that are pipelines (*pipeline_of* gives a tool's pipeline), their own
    (``outer.inner``). A step behind ``when:`` is asked about when it is reached.
    """
    covered: list[tuple[str, str]] = []
    for step in pipeline.steps:
        if step.when is not None:
            continue
        if needs_approval(step.tool):
            covered.append((step.name, step.tool))
        inner = pipeline_of(step.tool)
        if inner is not None:
            covered.extend(
                (f"{step.name}.{name}", tool) for name, tool in covered_steps(inner, pipeline_of, needs_approval)
            )
    return covered
