"""CEL expressions over a measured `value` (thresholds) and over a Node (health checks).

One wrapper around cel-python so the compiler (which only checks that an expression compiles and returns a
bool) and the in-workflow steps (which evaluate it) agree. Cross-type numeric comparison works for ordering
(`value >= 300`); note that cel-python, unlike Kubernetes' CEL, has no `double == int` overload, so write
`value == 1.0` rather than `value == 1`.
"""

from __future__ import annotations

from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

# A representative measurement used to check that a threshold expression returns a bool at all.
_PROBE_VALUE = 1.0


def threshold_problem(expression: str) -> str | None:
    """None when the expression compiles and yields a bool for a numeric `value`; otherwise why not."""
    try:
        result = evaluate(expression, {"value": celtypes.DoubleType(_PROBE_VALUE)})
    except CelError as error:
        return str(error)
    if not isinstance(result, bool):
        return f"expression must return bool, got {_cel_type(result)}"
    return None


def evaluate_threshold(expression: str, value: float) -> bool:
    """Whether a measured value satisfies the threshold expression."""
    result = evaluate(expression, {"value": celtypes.DoubleType(value)})
    if not isinstance(result, bool):
        raise CelError(f"expression must return bool, got {_cel_type(result)}")
    return result


class CelError(Exception):
    """An expression that does not parse, or fails to evaluate."""


def evaluate(expression: str, variables: dict[str, Any]) -> Any:
    """Evaluate a CEL expression; Python-native result (bool, float, str, ...)."""
    environment = celpy.Environment()
    try:
        program = environment.program(environment.compile(expression))
        result = program.evaluate({name: _to_cel(value) for name, value in variables.items()})
    except CELParseError as error:
        raise CelError(f"syntax error: {' '.join(str(error).split())}") from None
    except (CELEvalError, TypeError, ValueError) as error:
        raise CelError(_first_line(error)) from None
    if isinstance(result, CELEvalError):
        raise CelError(_first_line(result))
    if isinstance(result, celtypes.BoolType):
        return bool(result)
    return result


def _first_line(error: Exception) -> str:
    """cel-python's messages embed its whole activation; keep the part a person needs."""
    text = str(error.args[0]) if error.args else str(error)
    text = text.split(" (in activation", 1)[0].lstrip("(\"' ")
    return text.splitlines()[0] if text else type(error).__name__


def _to_cel(value: Any) -> Any:
    if isinstance(value, (celtypes.DoubleType, celtypes.IntType, celtypes.BoolType, celtypes.StringType)):
        return value
    return json_to_cel(value)


def _cel_type(value: Any) -> str:
    names = {celtypes.DoubleType: "double", celtypes.IntType: "int", celtypes.StringType: "string"}
    return next((name for kind, name in names.items() if isinstance(value, kind)), type(value).__name__)
