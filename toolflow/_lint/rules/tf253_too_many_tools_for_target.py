"""A model would be offered more tools at once than a `--target` provider accepts.

## What it does
With `toolflow lint --target openai` or `--target gemini`, reports each set
of tools a model is offered at once (as TF252 counts them: each toolset, the
policy's choice, deliberate mode) that has more than 128 tools, at the same
places as TF252.

Anthropic and MCP document no limit on the number of tools; for them the rule
reports nothing.

## Why is this bad?
The provider refuses the whole request. OpenAI's reference of `tools` says
"A max of 128 functions are supported", and the API answers more with
`Invalid 'tools': array too long. Expected an array with maximum length 128`
(reported by many MCP clients whose servers add up to more,
e.g. zed-industries/zed#32946). Vertex AI's function calling reference says
"The maximum number of function declarations that can be provided with the
request is 128". The agent loop never gets a first answer.

## Example
```yaml
# toolflow lint --target openai, with 130 tools in the specs and no policy
tools:
  tool_001: {description: The first of 130 tools}
```

## Use instead
```yaml
toolsets:
  orders: {tools: [lookup_order, refund_order, say]}
policy:
  toolset: orders
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._exposure import Exposure
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary
from toolflow._lint._target_facts import TOOL_COUNT_MAX


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    limits = [(target, TOOL_COUNT_MAX[target]) for target in dict.fromkeys(summary.targets) if target in TOOL_COUNT_MAX]
    if not limits:
        return
    for offer in Exposure.of(summary).offers():
        over = [(target, limit) for target, limit in limits if len(offer.names) > limit]
        if over:
            which = " and ".join(f"{target}'s limit of {limit}" for target, limit in over)
            message = (
                f"{offer.what} offers a model {len(offer.names)} tools at once, above {which} tools a request: "
                "the provider refuses every request; offer fewer with a toolset or the policy's 'allow'"
            )
            yield RULE.diag_at(offer.place, message)


RULE = Rule(
    code="TF253", name="too-many-tools-for-target", severity=Severity.ERROR, doc=__doc__ or "", check_project=check
)
