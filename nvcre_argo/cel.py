"""CEL expressions over a measured `value` (thresholds) and over a Node (health checks).

One wrapper around cel-python so the compiler (which only checks that an expression compiles and returns a
bool) and the in-workflow steps (which evaluate it) agree. Cross-type numeric comparison works for ordering
(`value >= 300`); note that cel-python, unlike Kubernetes' CEL, has no `double == int` overload, so write
`value == 1.0` rather than `value == 1`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError
from lark import Token, Tree

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
    return compile_expression(expression).evaluate(variables)


@dataclass(frozen=True)
class Program:
    """A compiled expression. Compiling costs more than evaluating (about 1 ms against a fraction of one), so
    an expression evaluated many times (the health check, once per Node event) is compiled once."""

    expression: str
    _ast: Any
    _runner: Any

    def evaluate(self, variables: dict[str, Any]) -> Any:
        """The result, Python-native for a bool; CelError when the expression fails on these variables."""
        try:
            result = self._runner.evaluate({name: _to_cel(value) for name, value in variables.items()})
        except (CELEvalError, TypeError, ValueError) as error:
            raise CelError(_first_line(error)) from None
        if isinstance(result, CELEvalError):
            raise CelError(_first_line(result))
        if isinstance(result, celtypes.BoolType):
            return bool(result)
        return result

    def selected_paths(self, variable: str, depth: int = 2) -> frozenset[tuple[str, ...]] | None:
        """The field paths (at most `depth` names long) the expression selects from `variable`, e.g.
        `{("spec", "unschedulable")}` for `node.spec.unschedulable == true`; None when it uses the variable in
        a way a path cannot describe (bare, indexed `node["spec"]`, or a comprehension variable of that name).

        What lies outside these paths cannot change the result, so a caller may drop it before converting a
        large object to CEL values (a Node's images and managed fields are most of its bytes)."""
        paths: set[tuple[str, ...]] = set()
        for path in _variable_paths(self._ast, variable):
            if path is None:
                return None
            paths.add(path[:depth])
        return frozenset(paths)


def compile_expression(expression: str) -> Program:
    """Parse and plan an expression once; CelError when it does not parse."""
    environment = celpy.Environment()
    try:
        ast = environment.compile(expression)
        return Program(expression, ast, environment.program(ast))
    except CELParseError as error:
        raise CelError(f"syntax error: {' '.join(str(error).split())}") from None
    except (CELEvalError, TypeError, ValueError) as error:
        raise CelError(_first_line(error)) from None


def _variable_paths(tree: Any, variable: str) -> Iterator[tuple[str, ...] | None]:
    """Every outermost `variable.a.b...` selection in the parse tree (lark's `member_dot` chains), as the
    tuple of names; None for a use of `variable` that is not such a chain."""
    if isinstance(tree, Token):
        return
    if tree.data == "member_dot":
        chain = _selection_chain(tree, variable)
        if chain is not None:
            yield chain
            return
    if tree.data in ("ident", "dot_ident") and any(str(child) == variable for child in tree.children):
        yield None
        return
    for child in tree.children:
        if isinstance(child, Tree):
            yield from _variable_paths(child, variable)


def _selection_chain(tree: Any, variable: str) -> tuple[str, ...] | None:
    """`variable.a.b` as ("a", "b") when `tree` (a member_dot) selects fields from the bare variable."""
    names: list[str] = []
    current = tree
    while isinstance(current, Tree) and current.data in ("member_dot", "member", "primary"):
        if current.data == "member_dot":
            names.append(str(current.children[1]))
        current = current.children[0]
    if isinstance(current, Tree) and current.data == "ident" and str(current.children[0]) == variable:
        return tuple(reversed(names))
    return None


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
