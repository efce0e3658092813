"""The certification Workflow's last step: fail when any category failed.

Categories run with `continueOn`, so one failure does not stop the next; without this step the certification
Workflow would end Succeeded regardless. Input is Argo's `name=Phase,...` list of the category steps' phases.
"""

from __future__ import annotations

from dataclasses import dataclass

PASSED_PHASES = frozenset({"Succeeded"})


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
