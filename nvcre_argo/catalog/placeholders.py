"""`%{name}` placeholders in catalog templates, and their substitution.

Why `%{...}`: the templates contain shell (`${VAR}`), Kubernetes (`$(VAR)`) and, once embedded in a Workflow,
Argo (`{{...}}`) syntax, and must not collide with any of them. A placeholder is replaced by the value's text
(command arguments and environment values are strings); a scalar that is exactly `%{name|int}` becomes an
integer, for the few integer fields such as `numProcPerNode`. Only resolver-computed values (numbers, sizes,
0/1 flags, fixed paths) are ever substituted: user strings are set structurally by the renderer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

PLACEHOLDER = re.compile(r"%\{([A-Za-z][A-Za-z0-9]*)(\|int)?\}")

KNOWN_PLACEHOLDERS = frozenset(
    {
        "gpusPerNode",
        "totalGpus",
        "maxBytes",
        "numIterations",
        "numCycles",
        "mnnvl",
        "ncclBinary",
        "mpirun",
        "timeoutSeconds",
        "maxSteps",
        "exitDurationMins",
        "saveInterval",
        "saveRetainInterval",
        "enableCheckpoint",
        "tensorParallel",
        "pipelineParallel",
    }
)


def find_placeholders(template: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every placeholder name in a template, with where it is."""
    if isinstance(template, str):
        for match in PLACEHOLDER.finditer(template):
            yield path, match.group(1)
    elif isinstance(template, Mapping):
        for key, value in template.items():
            yield from find_placeholders(value, (*path, str(key)))
    elif isinstance(template, list):
        for index, value in enumerate(template):
            yield from find_placeholders(value, (*path, index))


def fill_placeholders(template: Any, values: Mapping[str, Any]) -> Any:
    """A copy of the template with every placeholder replaced; KeyError names a missing value."""
    if isinstance(template, str):
        whole = PLACEHOLDER.fullmatch(template)
        if whole and whole.group(2):
            return int(values[whole.group(1)])
        return PLACEHOLDER.sub(lambda match: str(values[match.group(1)]), template)
    if isinstance(template, Mapping):
        return {key: fill_placeholders(value, values) for key, value in template.items()}
    if isinstance(template, list):
        return [fill_placeholders(value, values) for value in template]
    return template
