"""Argo's own offline linter (what `argo lint --offline` runs, at the pinned Argo version) accepts everything
the compiler and the template generator emit.

Schema checks and server-side dry-run cannot see Argo's semantic rules (which `{{...}}` resolve where, which
template a step calls, which inputs it must pass); Argo's validator can, so it judges our output here. The
linter is built from Go modules by `make testbin` (hack/testbin/argolint).
"""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from nvcre_argo.yamlio import dump_yaml
from tests.harness.versions import TESTBIN_SCRIPT, parse_env_file
from tests.unit.test_compiler import ALL_CASES, SAMPLE_PARENT_NAME, category_manifests, compiled_case

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted((ROOT / "workflow_templates").glob("*.yaml"))
NAMESPACE = "certify"


def _argolint() -> Path:
    output = subprocess.run(["bash", str(TESTBIN_SCRIPT), "print-dir"], capture_output=True, text=True, check=True)
    binary = Path(parse_env_file(output.stdout)["argo"]) / "argolint"
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: build it with `make testbin`")
    return binary


def _lint(files: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(_argolint()), *map(str, files)], capture_output=True, text=True, timeout=300, check=False
    )


def _write(path: Path, document: dict[str, Any]) -> Path:
    """Everything in one namespace, so the offline linter resolves workflowTemplateRef as a cluster would.
    A copy: the compiled Workflows are cached and shared with the snapshot tests."""
    document = copy.deepcopy(document)
    document["metadata"]["namespace"] = NAMESPACE
    path.write_text(dump_yaml(document))
    return path


def test_every_compiled_workflow_and_template_passes_argo_lint(tmp_path: Path) -> None:
    files = [_write(tmp_path / path.name, yaml.safe_load(path.read_text())) for path in TEMPLATES]
    for case in ALL_CASES:
        workflow = compiled_case(case)
        files.append(_write(tmp_path / f"{case}.yaml", workflow))
        for index, manifest in enumerate(category_manifests(workflow, SAMPLE_PARENT_NAME)):
            files.append(_write(tmp_path / f"{case}-category-{index}.yaml", manifest))

    result = _lint(files)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no linting errors found" in result.stdout


def test_argo_lint_rejects_a_step_that_calls_a_missing_template(tmp_path: Path) -> None:
    broken = copy.deepcopy(compiled_case(ALL_CASES[0]))
    broken["spec"]["templates"][-1]["steps"][0][0]["template"] = "no-such-template"
    path = tmp_path / "broken.yaml"
    path.write_text(dump_yaml(broken))

    result = _lint([path])

    assert result.returncode != 0
    assert "no-such-template" in result.stdout + result.stderr
