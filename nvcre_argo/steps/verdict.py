"""The certification Workflow's last step: fail when any category failed.

Categories run with `continueOn`, so one failure does not stop the next; without this step the certification
Workflow would end Succeeded regardless. Input is Argo's `name=Phase,...` list of the category steps' phases;
or, in the certification WorkflowTemplate (whose categories are one fan-out), the step names expected and Argo's
aggregate of the outputs of the fan-out's items that succeeded: a step missing from it failed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from nvcre_argo import contract

PASSED_PHASES = frozenset({"Succeeded"})
# What a passed category step outputs as its verdict (steps.children.CategoryOutcome).
PASSED_VERDICT = "Passed"


@dataclass(frozen=True)
class Verdict:
    phases: list[tuple[str, str]]

    @property
    def failed(self) -> list[str]:
        return [name for name, phase in self.phases if phase not in PASSED_PHASES]

    @property
    def passed(self) -> bool:
        return bool(self.phases) and not self.failed

    def summary(self) -> str:
        lines = [f"{name}: {phase}" for name, phase in self.phases]
        count = len(self.phases)
        if self.passed:
            lines.append(f"PASSED: {count}/{count} categories succeeded")
        else:
            lines.append(f"FAILED: {len(self.failed)}/{count} categories did not succeed: {', '.join(self.failed)}")
        return "\n".join(lines)


def parse_statuses(text: str) -> Verdict:
    """`a=Succeeded,b=Failed` → Verdict; an entry without `=` counts as failed (nothing to trust)."""
    phases = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, phase = item.partition("=")
        phases.append((name, phase or "Unknown"))
    return Verdict(phases)


def verdict_from_outputs(steps_json: str, outputs_json: str) -> Verdict:
    """Expected step names (JSON list) and the succeeded items' outputs (JSON list of objects with `step`)
    → Verdict; text that is not what Argo writes counts every category as failed (nothing to trust)."""
    try:
        steps = json.loads(steps_json)
    except json.JSONDecodeError:
        return Verdict([("categories", "Unknown")])
    try:
        outputs = json.loads(outputs_json or "[]")
    except json.JSONDecodeError:
        outputs = []
    succeeded = {
        str(item.get(contract.OUTPUT_CATEGORY_STEP))
        for item in (outputs if isinstance(outputs, list) else [])
        if isinstance(item, dict) and item.get(contract.OUTPUT_VERDICT) == PASSED_VERDICT
    }
    if not isinstance(steps, list):
        return Verdict([("categories", "Unknown")])
    return Verdict([(str(step), "Succeeded" if str(step) in succeeded else "Failed") for step in steps])
