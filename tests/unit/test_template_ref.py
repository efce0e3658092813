"""Certifications compiled for Argo's `templateReferencing: Strict` (`nvcre-compile --template-ref`).

The shapes are judged against Argo's own allow-list, read from the pinned Argo source, so the product's copy
(`render.template_ref.ALLOWED_OVERRIDES`) cannot drift from what the controller enforces; Argo's linter
judges the certification Workflow, the certification WorkflowTemplate it references and the category
Workflows its steps create. The end-to-end run under a strict controller is tests/e2e/test_strict_templates.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from nvcre_argo import contract
from nvcre_argo.cli.compile import compile_command
from nvcre_argo.cli.install import install_manifests
from nvcre_argo.compiler import CompileOptions
from nvcre_argo.plan.model import NodeGroup, Plan
from nvcre_argo.render.category_template import build_category_template
from nvcre_argo.render.install import InstallSettings
from nvcre_argo.render.install_watcher import watcher_args
from nvcre_argo.render.step_placement import StepPlacement, Toleration
from nvcre_argo.render.template_ref import ALLOWED_OVERRIDES, build_certification_template, disallowed_overrides
from nvcre_argo.steps.category_manifest import CategoryManifestError, select_category_workflow
from nvcre_argo.steps.concurrency import concurrency_limit
from nvcre_argo.steps.verdict import verdict_from_outputs
from nvcre_argo.yamlio import dump_yaml, load_yaml_mapping
from tests.harness.versions import ARGO_MAJORS, load_versions, module_dir
from tests.unit.test_argo_lint import _lint, _write
from tests.unit.test_compiler import ALL_CASES, CATEGORY_TEMPLATE_FILES, SAMPLE_PARENT_NAME, compile_case

TEMPLATE_REF = CompileOptions(template_ref=True)


def _argo_allow_list(major: str) -> set[str]:
    """Argo's allowedUserOverrideFields, in the YAML spelling (the WorkflowSpec fields' json tags)."""
    versions = load_versions()
    root = module_dir(versions[f"ARGO_{major.upper()}_MODULE"], versions[f"ARGO_{major.upper()}_VERSION"])
    merge = (root / "workflow" / "util" / "merge.go").read_text(encoding="utf-8")
    block = re.search(r"var allowedUserOverrideFields = map\[string\]bool\{(.*?)\n\}", merge, re.S)
    assert block is not None, "allowedUserOverrideFields not found in Argo's merge.go"
    go_names = re.findall(r'"(\w+)":\s*true', block.group(1))
    types = (root / "pkg" / "apis" / "workflow" / "v1alpha1" / "workflow_types.go").read_text(encoding="utf-8")
    spec = re.search(r"\ntype WorkflowSpec struct \{(.*?)\n\}", types, re.S)
    assert spec is not None
    tags = dict(re.findall(r"\n\t(\w+)\s+[^\n`]*`json:\"(\w+)", spec.group(1)))
    return {tags[name] for name in go_names}


def template_ref_workflows(case: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]], list[str]]:
    """(certification Workflow, its category Workflows by step name, the step names in order)."""
    workflow = compile_case(case, TEMPLATE_REF)
    parameters = {parameter["name"]: parameter["value"] for parameter in workflow["spec"]["arguments"]["parameters"]}
    manifests = load_yaml_mapping(parameters[contract.PARAM_CATEGORY_WORKFLOWS], "categories")
    return workflow, manifests, json.loads(parameters[contract.PARAM_CATEGORY_STEPS])


@pytest.mark.parametrize("major", ARGO_MAJORS)
def test_the_allow_list_is_the_one_argo_enforces(major: str) -> None:
    assert _argo_allow_list(major) == ALLOWED_OVERRIDES


@pytest.mark.parametrize("case", ALL_CASES)
def test_a_template_ref_certification_sets_only_fields_argo_lets_a_submitter_override(case: str) -> None:
    workflow, manifests, steps = template_ref_workflows(case)

    assert workflow["spec"]["workflowTemplateRef"] == {"name": contract.CERTIFICATION_TEMPLATE}
    assert disallowed_overrides(workflow["spec"]) == []
    assert list(manifests) == steps
    for step, manifest in manifests.items():
        assert disallowed_overrides(manifest["spec"]) == [], step
        assert "podSpecPatch" not in json.dumps(manifest)


def test_the_default_shape_is_what_a_strict_controller_would_refuse() -> None:
    """The checker can fail: the default category Workflow patches the step image and places its pods."""
    workflow = compile_case("seed-example")
    assert disallowed_overrides(workflow["spec"])[0] == "(no workflowTemplateRef)"
    (template,) = [t for t in workflow["spec"]["templates"] if t["name"].startswith("category-0")]
    env = {variable["name"]: variable["value"] for variable in template["container"]["env"]}
    manifest = load_yaml_mapping(env[contract.ENV_CATEGORY_WORKFLOW], "manifest")
    assert "podSpecPatch" in disallowed_overrides(manifest["spec"])
    assert "affinity" in disallowed_overrides(manifest["spec"])


def test_the_category_step_names_each_category_workflow_after_its_certification_workflow() -> None:
    workflow, manifests, steps = template_ref_workflows("seed-example")
    text = dump_yaml(manifests)

    chosen = [select_category_workflow(text, step, parent_name="gpu-cluster-cert-x7k2q") for step in steps]

    assert [item.manifest["metadata"]["name"] for item in chosen] == [
        "gpu-cluster-cert-x7k2q-0",
        "gpu-cluster-cert-x7k2q-1",
    ]
    assert [item.key for item in chosen] == ["communication/nccl-all-reduce", "training/nemotron5-8b"]
    assert (
        chosen[0].manifest["metadata"]["annotations"]["workflows.argoproj.io/description"] == "gpu-cluster-cert-x7k2q"
    )
    assert workflow["metadata"]["labels"]["nvcre.nvidia.com/role"] == "certification"


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda m: m["spec"].__setitem__("podSpecPatch", '{"containers":[{"name":"main","image":"evil"}]}'),
            "podSpecPatch",
        ),
        (lambda m: m["spec"].__setitem__("parallelism", 2), "parallelism"),
        (lambda m: m["spec"].__setitem__("templates", [{"name": "x"}]), "templates"),
        (lambda m: m["spec"].pop("workflowTemplateRef"), "no workflowTemplateRef"),
        (lambda m: m["spec"]["workflowTemplateRef"].__setitem__("name", "someone-elses"), "not a category"),
        (lambda m: m.__setitem__("kind", "Pod"), "not an argoproj.io/v1alpha1 Workflow"),
    ],
    ids=["pod-spec-patch", "parallelism", "own-templates", "no-template-ref", "foreign-template", "not-a-workflow"],
)
def test_the_category_step_refuses_a_manifest_a_strict_controller_would_not_run(change: Any, problem: str) -> None:
    _, manifests, steps = template_ref_workflows("seed-example")
    change(manifests[steps[0]])

    with pytest.raises(CategoryManifestError, match=problem):
        select_category_workflow(dump_yaml(manifests), steps[0], parent_name="p")


def test_the_category_step_refuses_a_step_it_has_no_workflow_for() -> None:
    _, manifests, _ = template_ref_workflows("seed-example")
    with pytest.raises(CategoryManifestError, match="no category Workflow for step 'other'"):
        select_category_workflow(dump_yaml(manifests), "other", parent_name="p")


def test_template_ref_refuses_the_options_it_cannot_carry_naming_them(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[2] / "examples" / "gpu-cluster-cert.yaml"
    result = CliRunner().invoke(
        compile_command,
        [str(source), "--template-ref", "--step-image", "mine:1", "--step-node-selector", "pool=system", "--no-lock"],
    )

    assert result.exit_code == 2
    assert "--template-ref cannot carry --step-image, --no-lock, --step-node-selector" in result.output


def test_template_ref_compiles_without_pod_options() -> None:
    source = Path(__file__).resolve().parents[2] / "examples" / "gpu-cluster-cert.yaml"
    result = CliRunner().invoke(compile_command, [str(source), "--template-ref", "--ttl", "1h", "--deadline", "3h"])

    assert result.exit_code == 0, result.output
    spec = yaml.safe_load(result.output)["spec"]
    assert spec["ttlStrategy"] == {"secondsAfterCompletion": 3600}
    assert spec["activeDeadlineSeconds"] == 3 * 3600


def test_the_certification_template_runs_the_categories_one_at_a_time_in_spec_order() -> None:
    template = build_certification_template(step_image="nvcre-argo:test")
    (steps,) = [t for t in template["spec"]["templates"] if t["name"] == contract.TEMPLATE_CERTIFICATION]

    assert steps["parallelism"] == 1
    fan_out = steps["steps"][0][0]
    assert fan_out["withParam"] == "{{workflow.parameters.steps}}"
    assert fan_out["continueOn"] == {"error": True, "failed": True}
    assert template["spec"]["synchronization"] == {"mutexes": [{"name": "nvcre-argo-gpu-nodes"}]}
    # Required arguments: a certification WorkflowTemplate submitted alone has nothing to run.
    assert all("value" not in parameter for parameter in template["spec"]["arguments"]["parameters"])


@pytest.mark.parametrize(
    ("outputs", "passed", "failed"),
    [
        ('[{"step":"a","verdict":"Passed"},{"step":"b","verdict":"Passed"}]', True, []),
        ('[{"step":"b","verdict":"Passed"}]', False, ["a"]),
        ("[]", False, ["a", "b"]),
        ("{{steps.category.outputs.parameters}}", False, ["a", "b"]),
    ],
    ids=["both-passed", "one-missing", "none-succeeded", "unresolved"],
)
def test_the_template_verdict_fails_every_category_step_that_did_not_pass(
    outputs: str, passed: bool, failed: list[str]
) -> None:
    verdict = verdict_from_outputs('["a", "b"]', outputs)
    assert (verdict.passed, verdict.failed) == (passed, failed)


@pytest.mark.parametrize(("max_concurrent", "expected"), [(2, 2), (None, 4), (0, 4)], ids=["set", "unset", "zero"])
def test_the_group_semaphore_limit_is_max_concurrent_or_no_limit_at_all(
    max_concurrent: int | None, expected: int
) -> None:
    nodes = ("n1", "n2", "n3", "n4")
    plan = Plan(None, nodes, (), tuple(NodeGroup(f"g{index}", (node,)) for index, node in enumerate(nodes)))
    assert concurrency_limit(plan, max_concurrent) == expected


def test_a_group_pod_takes_the_semaphore_the_plan_step_sizes_and_a_shared_runners_group_node_none() -> None:
    """With a pod per group Argo's semaphore holds maxConcurrent; a shared runner holds it itself, as Argo's
    controller would ask the semaphore for each of its group nodes on every pass (`steps.shared_runner`)."""
    template = build_category_template(domain="d", variant="v", description="", step_image="i", diagnose=True)
    by_name = {t["name"]: t for t in template["spec"]["templates"]}
    reference = by_name[contract.TEMPLATE_RUN_GROUP]["synchronization"]["semaphores"][0]["configMapKeyRef"]
    assert reference == {"name": "{{workflow.name}}-concurrency", "key": contract.CONCURRENCY_KEY}
    assert "synchronization" not in by_name[contract.TEMPLATE_GROUP]
    assert "synchronization" not in by_name[contract.TEMPLATE_RUN_GROUPS]


@pytest.mark.parametrize("path", CATEGORY_TEMPLATE_FILES, ids=lambda path: path.stem)
def test_a_category_template_has_no_default_target(path: Path) -> None:
    """Submitted alone without its `category` argument, Argo refuses it ("value is required")."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    (category,) = [p for p in document["spec"]["arguments"]["parameters"] if p["name"] == contract.PARAM_CATEGORY]
    assert "value" not in category
    assert "default" not in category


def test_template_ref_workflows_and_their_category_workflows_pass_argo_lint(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "workflow_templates"
    files = [_write(tmp_path / path.name, yaml.safe_load(path.read_text())) for path in sorted(root.glob("*.yaml"))]
    for case in ALL_CASES:
        workflow, manifests, steps = template_ref_workflows(case)
        files.append(_write(tmp_path / f"{case}.yaml", workflow))
        for index, step in enumerate(steps):
            chosen = select_category_workflow(dump_yaml(manifests), step, parent_name=SAMPLE_PARENT_NAME)
            files.append(_write(tmp_path / f"{case}-category-{index}.yaml", chosen.manifest))

    result = _lint(files)

    assert result.returncode == 0, result.stdout + result.stderr


def test_install_places_the_step_pods_of_every_template_where_a_template_ref_workflow_cannot() -> None:
    settings = InstallSettings(namespace="nvcre-argo", image="nvcre-argo:test", watch_namespaces=("team-a",))
    placement = StepPlacement(node_selector={"pool": "system"}, tolerations=(Toleration("dedicated", "system"),))

    templates = [
        manifest
        for manifest in install_manifests(settings, catalog_dirs=(), placement=placement)
        if manifest["kind"] == "WorkflowTemplate"
    ]

    assert {template["metadata"]["name"] for template in templates} >= {contract.CERTIFICATION_TEMPLATE}
    for template in templates:
        assert template["spec"]["nodeSelector"] == {"pool": "system"}
        assert template["spec"]["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "system"}]
        assert "affinity" not in template["spec"]  # no target is known at install time


def test_a_watcher_installed_with_template_ref_submits_the_strict_shape() -> None:
    strict = InstallSettings(namespace="n", image="i", watch_namespaces=("team-a",), template_ref=True)
    default = InstallSettings(namespace="n", image="i", watch_namespaces=("team-a",))

    assert watcher_args(strict, "team-a")[:4] == ["watch", "--namespace=team-a", "--submit", "--template-ref"]
    assert "--template-ref" not in watcher_args(default, "team-a")


def test_a_watcher_installed_submits_with_the_shared_runner_unless_told_a_pod_per_group() -> None:
    per_group = InstallSettings(namespace="n", image="i", watch_namespaces=("team-a",), shared_runner=False)
    default = InstallSettings(namespace="n", image="i", watch_namespaces=("team-a",))
    assert watcher_args(default, "team-a")[:4] == ["watch", "--namespace=team-a", "--submit", "--shared-runner"]
    assert watcher_args(per_group, "team-a")[:4] == ["watch", "--namespace=team-a", "--submit", "--pod-per-group"]
