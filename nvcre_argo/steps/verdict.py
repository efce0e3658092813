"""The certification Workflow's exit handler, `verdict`: fail when any category did not pass.

Categories run with `continueOn`, so one failure does not stop the next, and the Workflow's steps end
Succeeded whatever the categories did. The verdict fails it then, and it runs as the exit handler (Argo's
graph shows it as `<workflow>.onExit`) rather than as a last step for what an operator reads: Argo
gives a Workflow whose steps succeeded and whose exit handler failed that handler's message, so the list of
Workflows says `... FAILED: 1/2 categories did not succeed: nccl-all-reduce`; a failed last step would give
it Argo's `child '<node id>' failed`. As the exit handler it also runs when the Workflow is stopped, and
stops the category Workflows a killed step left running (`steps.children.stop_children`) before judging.
Argo's `terminate` runs no exit handler: the last step, `summary` (it lists the verdicts and never fails),
then fails as a step Argo never started, so a terminated certification never ends Succeeded.

What it judges by is what each category step decided: the step marks the category Workflow it followed with
its verdict (`nvcre.nvidia.com/reported`: Passed, Failed or Stopped, see `steps.children`). Only a `Passed`
mark on a category's latest attempt passes it (an `argo retry` starts attempts `-r2`, `-r3`, ...); a category
without one, or without any Workflow, failed: nothing to trust. A Workflow whose steps did not all run (Argo
says `Failed` or `Error` for them: stopped, or a step that errored for good) fails too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nvcre_argo.names import LABEL_CATEGORY_INDEX
from nvcre_argo.steps.children import REPORTED_ANNOTATION

PASSED_VERDICT = "Passed"
# `{{workflow.status}}` in an exit handler: the phase of the Workflow's steps.
STEPS_SUCCEEDED = "Succeeded"
NOT_STARTED = "NotStarted"


@dataclass(frozen=True)
class Verdict:
    """Each category step's verdict in spec order, and whether the Workflow's steps all ran."""

    verdicts: list[tuple[str, str]]
    steps_status: str = STEPS_SUCCEEDED

    @property
    def failed(self) -> list[str]:
        return [name for name, verdict in self.verdicts if verdict != PASSED_VERDICT]

    @property
    def passed(self) -> bool:
        return bool(self.verdicts) and not self.failed and self.steps_status == STEPS_SUCCEEDED

    def summary(self) -> str:
        """One line per category, then the verdict line (the step's message when it fails)."""
        lines = [f"{name}: {verdict}" for name, verdict in self.verdicts]
        count = len(self.verdicts)
        if self.passed:
            lines.append(f"PASSED: {count}/{count} categories succeeded")
            return "\n".join(lines)
        failed = f"{len(self.failed)}/{count} categories did not succeed: {', '.join(self.failed)}"
        if self.steps_status == STEPS_SUCCEEDED:
            verdict = f"FAILED: {failed}"
        else:
            verdict = f"FAILED: the certification's steps ended {self.steps_status or 'Unknown'}"
            verdict += f"; {failed}" if self.failed else ""
        lines.append(verdict)
        return "\n".join(lines)


def parse_step_names(text: str) -> list[str]:
    """The category step names in spec order (a JSON list); anything else is no category at all."""
    try:
        names = json.loads(text)
    except json.JSONDecodeError:
        return []
    return [str(name) for name in names] if isinstance(names, list) else []


def judge(step_names: Sequence[str], children: Iterable[Mapping[str, Any]], *, steps_status: str) -> Verdict:
    """The verdict from the category Workflows this certification Workflow created (any attempt): each
    category's is the `reported` mark of its latest attempt, matched by the `category-index` label."""
    latest: dict[str, Mapping[str, Any]] = {}
    for child in children:
        metadata = child.get("metadata") or {}
        index = (metadata.get("labels") or {}).get(LABEL_CATEGORY_INDEX)
        if index is None:
            continue
        if index not in latest or _creation_order(child) > _creation_order(latest[index]):
            latest[index] = child
    verdicts = []
    for index, name in enumerate(step_names):
        found = latest.get(str(index))
        annotations = ((found or {}).get("metadata") or {}).get("annotations") or {}
        verdicts.append((name, str(annotations.get(REPORTED_ANNOTATION, NOT_STARTED))))
    return Verdict(verdicts, steps_status)


def _creation_order(workflow: Mapping[str, Any]) -> tuple[str, int, str]:
    """Later attempts sort last: by creation time (RFC 3339 sorts as text), then by the name's length, as
    `-r10` follows `-r9`, then by name."""
    metadata = workflow.get("metadata") or {}
    name = str(metadata.get("name", ""))
    return str(metadata.get("creationTimestamp", "")), len(name), name
