"""The compile options that shape the Workflows around the tests: where step pods run, and how long
Workflows may run and are kept. Parsed and checked here (click callbacks), so a bad value is a usage error
naming the option, before anything is compiled."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import click

from nvcre_argo.api.labels import dns1123_subdomain_problems, label_value_problems, qualified_name_problems
from nvcre_argo.render.certification_workflow import DEFAULT_TTL_SECONDS
from nvcre_argo.render.step_placement import StepPlacement, Toleration
from nvcre_argo.resolve.duration import duration_seconds

F = TypeVar("F", bound=Callable[..., Any])

_DURATION = re.compile(r"([0-9]+(h|m|s))+")
_TOLERATION = re.compile(r"(?P<key>[^=:]+)(=(?P<value>[^:]*))?(:(?P<effect>[^:]*))?")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
NO_TTL = "none"


def _fail(problems: list[str], value: str) -> None:
    if problems:
        raise click.BadParameter(f"{'; '.join(problems)}, got {value!r}")


def _node_selector(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    selector: dict[str, str] = {}
    for item in values:
        key, equals, value = item.partition("=")
        if not equals:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}")
        _fail(qualified_name_problems(key), key)
        _fail(label_value_problems(value), value)
        selector[key] = value
    return selector


def _tolerations(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> tuple[Toleration, ...]:
    tolerations = []
    for item in values:
        match = _TOLERATION.fullmatch(item)
        if match is None:
            raise click.BadParameter(f"expected KEY[=VALUE][:EFFECT], got {item!r}")
        key, value, effect = match["key"], match["value"] or None, match["effect"] or None
        _fail(qualified_name_problems(key), key)
        if value:
            _fail(label_value_problems(value), value)
        if effect and effect not in _EFFECTS:
            raise click.BadParameter(f"effect must be one of {', '.join(_EFFECTS)}, got {effect!r}")
        tolerations.append(Toleration(key, value, effect))
    return tuple(tolerations)


def _names(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    for value in values:
        _fail(dns1123_subdomain_problems(value), value)
    return values


def _name(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        _fail(dns1123_subdomain_problems(value), value)
    return value


def _duration(_ctx: click.Context, _param: click.Parameter, value: str | None) -> int | None:
    """Seconds of a `1h30m`-style duration (the API's own spelling); `none` (for `--ttl`) means unset."""
    if value is None or value == NO_TTL:
        return None
    if not _DURATION.fullmatch(value) or duration_seconds(value) == 0:
        raise click.BadParameter(f"expected a positive duration such as 12h or 90m, got {value!r}")
    return duration_seconds(value)


def step_placement_options(function: F, *, on_target: bool = True) -> F:
    """`--step-node-selector`, `--step-toleration`, `--step-priority-class`, `--step-image-pull-secret`,
    `--steps-on-target` (unless `on_target` is False: `install` knows no target); the command receives them as
    keyword arguments for :func:`step_placement`."""
    decorators = [
        click.option(
            "--step-node-selector",
            multiple=True,
            callback=_node_selector,
            metavar="KEY=VALUE",
            help="Run step pods only on nodes with this label (repeatable), e.g. a system node pool.",
        ),
        click.option(
            "--step-toleration",
            multiple=True,
            callback=_tolerations,
            metavar="KEY[=VALUE][:EFFECT]",
            help="Let step pods tolerate this taint (repeatable).",
        ),
        click.option("--step-priority-class", default=None, callback=_name, help="priorityClassName of the step pods."),
        click.option(
            "--step-image-pull-secret",
            multiple=True,
            callback=_names,
            metavar="NAME",
            help="Secret to pull the step image with (repeatable).",
        ),
    ]
    if on_target:
        decorators.append(
            click.option(
                "--steps-on-target",
                is_flag=True,
                help="Allow step pods onto the nodes under test (by default they avoid the target).",
            )
        )
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


def step_placement(
    *,
    step_node_selector: dict[str, str],
    step_toleration: tuple[Toleration, ...],
    step_priority_class: str | None,
    step_image_pull_secret: tuple[str, ...],
    steps_on_target: bool = False,
) -> StepPlacement:
    return StepPlacement(
        node_selector=step_node_selector,
        tolerations=step_toleration,
        priority_class=step_priority_class,
        image_pull_secrets=step_image_pull_secret,
        avoid_target=not steps_on_target,
    )


def installed_placement_options(function: F) -> F:
    """The step placement options of `install`: the same, but no `--steps-on-target` (no target is known)."""
    return step_placement_options(function, on_target=False)


def lifetime_options(function: F) -> F:
    """`--ttl`, `--deadline`, `--category-deadline`, as seconds (None: unset)."""
    decorators = [
        click.option(
            "--ttl",
            default=f"{DEFAULT_TTL_SECONDS // 3600}h",
            show_default=True,
            callback=_duration,
            help=f"Delete finished certification Workflows after this long ({NO_TTL}: keep them); results stay.",
        ),
        click.option(
            "--deadline",
            default=None,
            callback=_duration,
            help="activeDeadlineSeconds of the certification Workflow (default: none; each category has one).",
        ),
        click.option(
            "--category-deadline",
            default=None,
            callback=_duration,
            help="activeDeadlineSeconds of every category Workflow (default: derived from its plan).",
        ),
    ]
    for decorator in reversed(decorators):
        function = decorator(function)
    return function
