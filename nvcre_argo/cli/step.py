"""`nvcre-argo step ...`: the entrypoints the compiled Workflows run in the package's own image."""

from __future__ import annotations

import os

import click

from nvcre_argo import contract
from nvcre_argo.steps.verdict import parse_statuses


@click.group("step")
def step_group() -> None:
    """Steps run inside Argo Workflows (not meant to be run by hand)."""


@step_group.command("verdict")
def verdict_command() -> None:
    """Exit 1 when any category step of the certification Workflow did not succeed."""
    verdict = parse_statuses(os.environ.get(contract.ENV_STATUSES, ""))
    click.echo(verdict.summary())
    raise SystemExit(0 if verdict.passed else 1)
