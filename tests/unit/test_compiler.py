"""The compiler: Certification → certification (parent) Workflow → category Workflows → WorkflowTemplates.

What is checked, and against what:
* the compiled YAML of the seed example and of a matrix (each catalog entry alone; gang scheduler KAI / Run:ai /
  none; workload labels at both levels; maxConcurrent), pinned by reviewed syrupy snapshots, and the same
  properties asserted from DESIGN.md §4 independently of the snapshots (categories in spec order, one step
  group each, step names `domain-variant`, the `nvcre.nvidia.com/*` labels, title/description annotations,
  `continueOn` on category steps, the verdict step last);
* every emitted object against the full Argo CRD schemas of v3.7 and v4, made strict (tests/support/crd_schemas.py);
* the Argo semantics the schema and Hera do not check (tests/support/argo_semantics.py; `argo-hera-trainer.md`
  §1.11, §1.13);
* determinism (CONVENTIONS.md "Determinism"), in-process and across `PYTHONHASHSEED`s;
* the `nvcre-compile` and `nvcre-argo templates` command lines: errors (exit 1, nothing on stdout, every error
  with its field path on stderr), `-o`, `--check`, `--format json`, `--name`, `--step-image`, `--namespace`.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from nvcre_argo import contract
from nvcre_argo.api.certification import API_VERSION, KIND
from nvcre_argo.catalog.loader import Catalog, load_catalog
from nvcre_argo.cli.compile import compile_command
from nvcre_argo.cli.main import cli
from nvcre_argo.compiler import CompileOptions, compile_certifications
from nvcre_argo.loading import LoadedCertification, load_certifications, parse_certification
from nvcre_argo.names import category_step_names
from nvcre_argo.render.certification_workflow import DEFAULT_LOCK, embedded_category_workflow
from nvcre_argo.steps.context import parse_category
from nvcre_argo.yamlio import dump_yaml
from tests.support.argo_semantics import (
    Problem,
    loose_tag_problems,
    name_problems,
    structure_problems,
    tag_problems,
    template_ref_problems,
    workflow_problems,
)
from tests.support.crd_schemas import ARGO_VERSIONS, validation_errors

REPO_ROOT = Path(__file__).resolve().parents[2]
SEED_EXAMPLE = REPO_ROOT / "examples" / "gpu-cluster-cert.yaml"
TEMPLATES_DIR = REPO_ROOT / "workflow_templates"
TEMPLATE_FILES = sorted(TEMPLATES_DIR.glob("*.yaml"))
CATEGORY_TEMPLATE_FILES = [path for path in TEMPLATE_FILES if path.stem != contract.CERTIFICATION_TEMPLATE]
COMPILE_SCRIPT = Path(sys.executable).with_name("nvcre-compile")
MIB = 1024 * 1024

CERTIFICATION = "nvcre.nvidia.com/certification"
CATEGORY_INDEX = "nvcre.nvidia.com/category-index"
DOMAIN = "nvcre.nvidia.com/domain"
VARIANT = "nvcre.nvidia.com/variant"
ROLE = "nvcre.nvidia.com/role"
MANAGED_BY = "app.kubernetes.io/managed-by"
TITLE = "workflows.argoproj.io/title"
DESCRIPTION = "workflows.argoproj.io/description"
PARENT_NAME_IN_MANIFEST = "{{workflow.name}}"
SAMPLE_PARENT_NAME = "x" * 55 + "abcde"  # the longest parent name a generateName may produce (55 + 5)

TARGET = {"nodeSelector": {"nvidia.com/gpu.present": "true"}}
ALL_REDUCE = {"domain": "communication", "variant": "nccl-all-reduce"}
NEMOTRON = {"domain": "training", "variant": "nemotron5-8b"}
DCGM1 = {"domain": "diagnostics", "variant": "dcgm-level1"}
KAI = {"schedulerName": "kai-scheduler", "queue": "burn-in"}
RUNAI = {"schedulerName": "runai-scheduler", "queueLabelKey": "runai/queue", "queue": "team-a"}
KUEUE = "kueue.x-k8s.io/queue-name"


@functools.cache
def builtin_catalog() -> Catalog:
    return load_catalog()


ENTRY_KEYS = builtin_catalog().names()


def certification_document(name: str, categories: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": "nvcre"},
        "spec": {"target": TARGET, **spec, "categories": categories},
    }


def _entry(key: str) -> dict[str, str]:
    domain, variant = key.split("/")
    return {"domain": domain, "variant": variant}


def sixty_four_categories() -> list[dict[str, str]]:
    """64 categories (the API's maximum) cycling through the catalog, so most step names repeat."""
    return [_entry(ENTRY_KEYS[index % len(ENTRY_KEYS)]) for index in range(64)]


# The matrix: id → the Certification document (the seed example is read from its file instead).
MATRIX: dict[str, dict[str, Any]] = {
    **{f"entry-{key.replace('/', '-')}": certification_document("entry-alone", [_entry(key)]) for key in ENTRY_KEYS},
    "gang-kai": certification_document("gang-kai", [ALL_REDUCE, NEMOTRON], gangScheduler=KAI),
    "gang-runai": certification_document("gang-runai", [ALL_REDUCE, NEMOTRON], gangScheduler=RUNAI),
    "gang-none": certification_document("gang-none", [ALL_REDUCE, NEMOTRON]),
    "workload-labels-both-levels": certification_document(
        "workload-labels",
        [
            {**ALL_REDUCE, "options": {"workloadMetadata": {"labels": {"team": "burn-in", "cost-center": "42"}}}},
            NEMOTRON,
        ],
        gangScheduler=KAI,
        workloadMetadata={"labels": {"team": "infra", KUEUE: "gpu-queue"}},
    ),
    "max-concurrent": certification_document(
        "max-concurrent",
        [
            ALL_REDUCE,
            {**NEMOTRON, "options": {"maxConcurrent": 2}},
            {**DCGM1, "options": {"maxConcurrent": 0}},
        ],
        maxConcurrent=4,
    ),
}
SEED = "seed-example"
SIXTY_FOUR = "sixty-four-categories"
CASES = [SEED, *MATRIX]
ALL_CASES = [*CASES, SIXTY_FOUR]


@functools.cache
def loaded_case(case: str) -> LoadedCertification:
    if case == SEED:
        (loaded,) = load_certifications(SEED_EXAMPLE.read_text(encoding="utf-8"), "examples/gpu-cluster-cert.yaml")
        return loaded
    document = certification_document("sixty-four", sixty_four_categories()) if case == SIXTY_FOUR else MATRIX[case]
    return LoadedCertification(f"{case}.yaml", parse_certification(copy.deepcopy(document), f"{case}.yaml"))


def compile_case(case: str, options: CompileOptions | None = None) -> dict[str, Any]:
    (compiled,) = compile_certifications(
        [loaded_case(case)], catalog=builtin_catalog(), options=options or CompileOptions()
    )
    return compiled.workflow


@functools.cache
def compiled_case(case: str) -> dict[str, Any]:
    return compile_case(case)


@functools.cache
def compiled_yaml(case: str) -> str:
    return dump_yaml(compiled_case(case))


def spec_categories(case: str) -> list[tuple[str, str]]:
    return [(category.domain, category.variant) for category in loaded_case(case).certification.spec.categories]


def templates_by_name(workflow: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {template["name"]: template for template in workflow["spec"]["templates"]}


def step_groups(workflow: dict[str, Any]) -> list[list[dict[str, Any]]]:
    groups: list[list[dict[str, Any]]] = templates_by_name(workflow)[workflow["spec"]["entrypoint"]]["steps"]
    return groups


def category_steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [group[0] for group in step_groups(workflow)[:-1]]


def category_manifests(workflow: dict[str, Any], parent_name: str | None = None) -> list[dict[str, Any]]:
    """The category Workflows the parent creates, in step order; `parent_name` fills `{{workflow.name}}`."""
    templates = templates_by_name(workflow)
    manifests = []
    for step in category_steps(workflow):
        manifest = embedded_category_workflow(templates[step["template"]])
        assert manifest is not None, f"step {step['name']} starts no category Workflow"
        if parent_name is not None:  # as Argo fills the step's environment: every occurrence
            manifest = json.loads(json.dumps(manifest).replace(PARENT_NAME_IN_MANIFEST, parent_name))
        manifests.append(manifest)
    return manifests


def category_argument(manifest: dict[str, Any]) -> dict[str, Any]:
    (value,) = [
        parameter["value"]
        for parameter in manifest["spec"]["arguments"]["parameters"]
        if parameter["name"] == contract.PARAM_CATEGORY
    ]
    argument: dict[str, Any] = json.loads(value)
    return argument


@functools.cache
def committed_templates() -> dict[str, dict[str, Any]]:
    """The WorkflowTemplates in workflow_templates/, by metadata.name."""
    templates = {}
    for path in TEMPLATE_FILES:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        templates[document["metadata"]["name"]] = document
    return templates


def index_reserve(workflow: dict[str, Any]) -> int:
    """Characters a category Workflow appends to its parent's name: `-<largest index>`."""
    return len(f"-{len(category_steps(workflow)) - 1}")


def rendered(problems: list[Problem]) -> list[str]:
    return [str(problem) for problem in problems]


# ------------------------------------------------------------------------------------------------------- snapshots


@pytest.mark.parametrize("case", CASES)
def test_the_compiled_yaml_matches_the_reviewed_snapshot(case: str, snapshot: Any) -> None:
    assert compiled_yaml(case) == snapshot


def test_a_64_category_certification_keeps_its_reviewed_size_and_step_names(snapshot: Any) -> None:
    workflow = compiled_case(SIXTY_FOUR)
    size = len(compiled_yaml(SIXTY_FOUR).encode("utf-8"))
    summary = {
        "bytes": size,
        "steps": [group[0]["name"] for group in step_groups(workflow)],
        "templates": [template["name"] for template in workflow["spec"]["templates"]],
    }

    assert size < MIB
    assert summary == snapshot


# ---------------------------------------------------------------------------------- the design, asserted directly


@pytest.mark.parametrize("case", ALL_CASES)
def test_categories_run_in_spec_order_one_step_group_each(case: str) -> None:
    workflow = compiled_case(case)
    groups = step_groups(workflow)
    manifests = category_manifests(workflow)

    assert [len(group) for group in groups] == [1] * len(groups)
    assert len(groups) == len(spec_categories(case)) + 1
    assert [step["template"] for step in category_steps(workflow)] == [
        f"category-{index}" for index in range(len(spec_categories(case)))
    ]
    assert [
        (manifest["metadata"]["labels"][DOMAIN], manifest["metadata"]["labels"][VARIANT]) for manifest in manifests
    ] == spec_categories(case)
    assert [manifest["metadata"]["labels"][CATEGORY_INDEX] for manifest in manifests] == [
        str(index) for index in range(len(manifests))
    ]


@pytest.mark.parametrize("case", ALL_CASES)
def test_step_names_read_like_the_spec(case: str) -> None:
    expected = []
    seen: dict[str, int] = {}
    for _domain, variant in spec_categories(case):
        base = variant
        seen[base] = seen.get(base, 0) + 1
        expected.append(base if seen[base] == 1 else f"{base}-{seen[base]}")

    assert [step["name"] for step in category_steps(compiled_case(case))] == expected


def test_repeated_categories_get_numbered_step_names() -> None:
    names = category_step_names([("communication", "nccl-all-reduce")] * 3 + [("diagnostics", "dcgm-level1")])

    assert names == [
        "nccl-all-reduce",
        "nccl-all-reduce-2",
        "nccl-all-reduce-3",
        "dcgm-level1",
    ]


@pytest.mark.parametrize("case", ALL_CASES)
def test_the_verdict_step_runs_last_alone_and_sees_every_category(case: str) -> None:
    workflow = compiled_case(case)
    last = step_groups(workflow)[-1]
    verdict = templates_by_name(workflow)[contract.TEMPLATE_VERDICT]
    (reads,) = [env["value"] for env in verdict["container"]["env"] if env["name"] == contract.ENV_STATUSES]
    (statuses,) = [item["value"] for item in last[0]["arguments"]["parameters"] if item["name"] == "statuses"]

    assert [step["name"] for step in last] == [contract.TEMPLATE_VERDICT]
    assert "continueOn" not in last[0]
    assert reads == "{{inputs.parameters.statuses}}"
    assert statuses == ",".join(
        f"{step['name']}={{{{steps.{step['name']}.status}}}}" for step in category_steps(workflow)
    )


@pytest.mark.parametrize("case", ALL_CASES)
def test_category_steps_survive_a_failed_category_and_follow_it_idempotently(case: str) -> None:
    workflow = compiled_case(case)
    templates = templates_by_name(workflow)

    for step in category_steps(workflow):
        template = templates[step["template"]]
        env = {item["name"]: item["value"] for item in template["container"]["env"]}
        assert step["continueOn"] == {"failed": True, "error": True}
        assert template["container"]["args"] == ["category"]
        # A retried step follows the Workflow it started (deterministic name), so a lost pod (an Error) is
        # retried; a failed category is not, and keeps its message (no retry expression, which would replace it).
        assert template["retryStrategy"] == {"limit": "3", "retryPolicy": "OnError"}
        assert env[contract.ENV_WORKFLOW_UID] == "{{workflow.uid}}"
        assert [output["name"] for output in template["outputs"]["parameters"]] == [
            contract.OUTPUT_CATEGORY_WORKFLOW,
            contract.OUTPUT_VERDICT,
            contract.OUTPUT_FAILED_NODE_COUNT,
        ]
        assert all("default" in output["valueFrom"] for output in template["outputs"]["parameters"])


@pytest.mark.parametrize("case", ALL_CASES)
def test_the_certification_workflow_stops_its_categories_holds_the_lock_and_keeps_failed_pods(case: str) -> None:
    spec = compiled_case(case)["spec"]
    templates = templates_by_name(compiled_case(case))

    # The exit handler stops category Workflows still running, unless the certification succeeded (then every
    # category ran to its end and there is nothing to stop).
    assert spec["onExit"] == contract.TEMPLATE_ON_EXIT
    assert templates[contract.TEMPLATE_ON_EXIT]["steps"] == [
        [
            {
                "name": contract.TEMPLATE_STOP_CATEGORIES,
                "template": contract.TEMPLATE_STOP_CATEGORIES,
                "when": "{{workflow.status}} != Succeeded",
            }
        ]
    ]
    assert templates[contract.TEMPLATE_STOP_CATEGORIES]["container"]["args"] == ["stop-categories"]
    assert spec["synchronization"] == {"mutexes": [{"name": DEFAULT_LOCK}]}
    assert spec["podGC"] == {"strategy": "OnPodSuccess", "deleteDelayDuration": "10m"}


def test_the_lock_can_be_renamed_or_dropped() -> None:
    renamed = yaml.safe_load(invoke(str(SEED_EXAMPLE), "--lock", "pool-a").stdout)
    unlocked = yaml.safe_load(invoke(str(SEED_EXAMPLE), "--no-lock").stdout)
    refused = invoke(str(SEED_EXAMPLE), "--lock", "Pool A")

    assert renamed["spec"]["synchronization"] == {"mutexes": [{"name": "pool-a"}]}
    assert "synchronization" not in unlocked["spec"]
    assert refused.exit_code == 2
    assert "Pool A" in refused.output


@pytest.mark.parametrize("case", ALL_CASES)
def test_every_workflow_is_labelled_and_titled_for_the_certification(case: str) -> None:
    workflow = compiled_case(case)
    name = loaded_case(case).certification.metadata.name
    metadata = workflow["metadata"]

    assert metadata["labels"][CERTIFICATION] == name
    assert metadata["labels"][ROLE] == "certification"
    assert metadata["labels"][MANAGED_BY] == "nvcre-argo"
    # No title: Argo's list shows the run's name, `<certification>-<suffix>`, over the category count.
    assert TITLE not in metadata["annotations"]
    assert metadata["annotations"][DESCRIPTION] == f"{len(spec_categories(case))} categories"
    assert metadata["namespace"] == "nvcre"
    assert metadata["generateName"] == f"{name}-"
    for index, (manifest, (domain, variant)) in enumerate(
        zip(category_manifests(workflow), spec_categories(case), strict=True)
    ):
        labels, annotations = manifest["metadata"]["labels"], manifest["metadata"]["annotations"]
        assert labels[CERTIFICATION] == name
        assert labels[ROLE] == "category"
        assert labels[MANAGED_BY] == "nvcre-argo"
        assert (labels[CATEGORY_INDEX], labels[DOMAIN], labels[VARIANT]) == (str(index), domain, variant)
        assert annotations[TITLE] == f"{index + 1}/{len(spec_categories(case))} {variant}"
        assert annotations[DESCRIPTION] == PARENT_NAME_IN_MANIFEST
        assert manifest["metadata"]["name"] == f"{PARENT_NAME_IN_MANIFEST}-{index}"
        assert "namespace" not in manifest["metadata"]  # created in the parent's namespace


@pytest.mark.parametrize("case", ALL_CASES)
def test_each_category_workflow_runs_its_entry_template_with_the_resolved_category(case: str) -> None:
    name = loaded_case(case).certification.metadata.name
    for index, (manifest, (domain, variant)) in enumerate(
        zip(category_manifests(compiled_case(case)), spec_categories(case), strict=True)
    ):
        argument = category_argument(manifest)
        parameters = {
            parameter["name"]: parameter["value"] for parameter in manifest["spec"]["arguments"]["parameters"]
        }

        assert manifest["spec"]["workflowTemplateRef"] == {"name": f"nvcre-{domain}-{variant}"}
        assert manifest["spec"]["workflowTemplateRef"]["name"] in committed_templates()
        assert parameters[contract.PARAM_CERTIFICATION] == name
        assert (argument["index"], argument["domain"], argument["variant"]) == (index, domain, variant)


@pytest.mark.parametrize(
    ("shared_runner", "entrypoints"),
    [(False, ["diagnose", None]), (True, ["diagnose-shared", "category-shared"])],
)
def test_each_category_workflow_starts_at_its_entrypoint_and_shared_runner_picks_the_shared_one(
    shared_runner: bool, entrypoints: list[str | None]
) -> None:
    document = certification_document(
        "isolate",
        [
            {"domain": "communication", "variant": "nccl-all-reduce", "options": {"testScale": "diagnose"}},
            {"domain": "diagnostics", "variant": "dcgm-level1"},
        ],
    )
    loaded = LoadedCertification("isolate.yaml", parse_certification(document, "isolate.yaml"))
    (compiled,) = compile_certifications(
        [loaded], catalog=builtin_catalog(), options=CompileOptions(shared_runner=shared_runner)
    )
    manifests = category_manifests(compiled.workflow)
    assert [manifest["spec"].get("entrypoint") for manifest in manifests] == entrypoints
    for manifest in manifests:  # each entrypoint is a template of the installed WorkflowTemplate
        template = committed_templates()[manifest["spec"]["workflowTemplateRef"]["name"]]
        names = {item["name"] for item in template["spec"]["templates"]}
        assert manifest["spec"].get("entrypoint", template["spec"]["entrypoint"]) in names


@pytest.mark.parametrize(
    ("case", "label_key", "queue"),
    [
        pytest.param("gang-kai", "kai.scheduler/queue", "burn-in", id="kai"),
        pytest.param("gang-runai", "runai/queue", "team-a", id="runai"),
    ],
)
def test_the_gang_scheduler_and_its_queue_label_reach_every_category(case: str, label_key: str, queue: str) -> None:
    gang = MATRIX[case]["spec"]["gangScheduler"]
    for manifest in category_manifests(compiled_case(case)):
        argument = category_argument(manifest)

        assert argument["workloadLabels"] == {label_key: queue}
        assert argument["gang"] == {
            "schedulerName": gang["schedulerName"],
            "queue": queue,
            "queueLabelKey": label_key,
        }


def test_without_a_gang_scheduler_no_queue_label_or_gang_is_compiled() -> None:
    for manifest in category_manifests(compiled_case("gang-none")):
        argument = category_argument(manifest)

        assert argument["workloadLabels"] == {}
        assert "gang" not in argument


def test_workload_labels_merge_global_then_category_then_the_queue_label() -> None:
    first, second = (
        category_argument(manifest) for manifest in category_manifests(compiled_case("workload-labels-both-levels"))
    )

    assert first["workloadLabels"] == {
        "cost-center": "42",
        "kai.scheduler/queue": "burn-in",
        KUEUE: "gpu-queue",
        "team": "burn-in",
    }
    assert second["workloadLabels"] == {"kai.scheduler/queue": "burn-in", KUEUE: "gpu-queue", "team": "infra"}


def test_max_concurrent_reaches_the_plan_step_in_the_category_argument_not_the_workflow_spec() -> None:
    manifests = category_manifests(compiled_case("max-concurrent"))

    # The runner, or the plan step sizing the group semaphore, reads it from the argument; Argo's strict template
    # referencing would refuse a category Workflow setting spec.parallelism.
    assert all("parallelism" not in manifest["spec"] for manifest in manifests)
    arguments = [
        parse_category(parameter["value"])
        for manifest in manifests
        for parameter in manifest["spec"]["arguments"]["parameters"]
        if parameter["name"] == contract.PARAM_CATEGORY
    ]
    # global 4 inherited; per-category 2 wins; per-category 0 means unlimited
    assert [category.options.max_concurrent for category in arguments] == [4, 2, 0]


def test_without_max_concurrent_no_category_workflow_limits_parallelism() -> None:
    for case in CASES:
        if case != "max-concurrent":
            assert all("parallelism" not in manifest["spec"] for manifest in category_manifests(compiled_case(case)))


# ----------------------------------------------------------------------------------------- strict schema validation


@pytest.mark.parametrize("argo_version", ARGO_VERSIONS)
@pytest.mark.parametrize("case", ALL_CASES)
def test_the_parent_workflow_passes_the_strict_argo_crd_schema(case: str, argo_version: str) -> None:
    assert validation_errors("Workflow", compiled_case(case), argo_version) == []


@pytest.mark.parametrize("argo_version", ARGO_VERSIONS)
@pytest.mark.parametrize("case", ALL_CASES)
def test_every_category_workflow_passes_the_strict_argo_crd_schema(case: str, argo_version: str) -> None:
    for index, manifest in enumerate(category_manifests(compiled_case(case), SAMPLE_PARENT_NAME)):
        assert validation_errors("Workflow", manifest, argo_version) == [], f"category {index}"


@pytest.mark.parametrize("argo_version", ARGO_VERSIONS)
@pytest.mark.parametrize("path", TEMPLATE_FILES, ids=lambda path: path.stem)
def test_every_committed_workflow_template_passes_the_strict_argo_crd_schema(path: Path, argo_version: str) -> None:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))

    assert validation_errors("WorkflowTemplate", document, argo_version) == []


@pytest.mark.parametrize("argo_version", ARGO_VERSIONS)
def test_the_strict_schema_rejects_a_misspelled_field_in_a_compiled_workflow(argo_version: str) -> None:
    workflow = copy.deepcopy(compiled_case(SEED))
    retry = workflow["spec"]["templates"][0]["retryStrategy"]
    retry["retryPolcy"] = retry.pop("retryPolicy")

    errors = validation_errors("Workflow", workflow, argo_version)

    assert len(errors) == 1
    assert errors[0].startswith("spec.templates[0].retryStrategy: Additional properties are not allowed")
    assert "retryPolcy" in errors[0]


def test_workflow_templates_holds_one_template_per_catalog_entry_and_the_certification_template() -> None:
    assert len(TEMPLATE_FILES) == len(ENTRY_KEYS) + 1
    assert {path.stem for path in CATEGORY_TEMPLATE_FILES} == {f"nvcre-{key.replace('/', '-')}" for key in ENTRY_KEYS}
    assert (TEMPLATES_DIR / f"{contract.CERTIFICATION_TEMPLATE}.yaml") in TEMPLATE_FILES


# ------------------------------------------------------------------------------------------------- Argo semantics


@pytest.mark.parametrize("case", ALL_CASES)
def test_the_parent_workflow_has_valid_names_references_and_inputs(case: str) -> None:
    workflow = compiled_case(case)
    problems = [
        *name_problems(workflow["metadata"], reserve=index_reserve(workflow)),
        *structure_problems(workflow),
    ]

    assert rendered(problems) == []


@pytest.mark.parametrize("case", ALL_CASES)
def test_the_parent_workflow_tags_name_only_workflow_variables_or_existing_steps(case: str) -> None:
    assert rendered(loose_tag_problems(compiled_case(case))) == []


# Argo resolves `steps.*` only in a steps template's own step fields: the verdict reads its input parameter.
@pytest.mark.parametrize("case", ALL_CASES)
def test_every_parent_workflow_tag_resolves_in_the_scope_argo_gives_it(case: str) -> None:
    assert rendered(tag_problems(compiled_case(case))) == []


@pytest.mark.parametrize("case", ALL_CASES)
def test_every_category_workflow_references_its_template_with_exactly_its_parameters(case: str) -> None:
    workflow = compiled_case(case)
    name = loaded_case(case).certification.metadata.name
    for manifest in category_manifests(workflow, SAMPLE_PARENT_NAME):
        problems = [
            *template_ref_problems(manifest, committed_templates()),
            *name_problems(manifest["metadata"]),
        ]
        assert rendered(problems) == [], manifest["metadata"]["name"]
        assert manifest["metadata"]["labels"][CERTIFICATION] == name


@pytest.mark.parametrize("path", TEMPLATE_FILES, ids=lambda path: path.stem)
def test_every_committed_workflow_template_is_valid_for_argo(path: Path) -> None:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))

    assert rendered(workflow_problems(document)) == []
    assert document["metadata"]["name"] == path.stem


def test_a_category_deletes_its_unfinished_trainjobs_on_exit_unless_it_succeeded() -> None:
    for path in CATEGORY_TEMPLATE_FILES:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        templates = templates_by_name(document)
        assert document["spec"]["onExit"] == contract.TEMPLATE_ON_EXIT, path.name
        ((step,),) = templates[contract.TEMPLATE_ON_EXIT]["steps"]
        assert step == {
            "name": contract.TEMPLATE_CLEANUP,
            "template": contract.TEMPLATE_CLEANUP,
            "when": "{{workflow.status}} != Succeeded",
        }, path.name
        assert templates[contract.TEMPLATE_CLEANUP]["container"]["args"] == ["cleanup"], path.name


# An overflow group runs in its host group's step: one fan-out, and no step Argo would draw as Skipped. The
# confirmation rounds follow it (starting at round 1), before record.
def test_a_category_runs_plan_one_fan_out_of_groups_confirm_and_record() -> None:
    groups = f"{{{{steps.{contract.TEMPLATE_PLAN}.outputs.parameters.{contract.OUTPUT_GROUPS}}}}}"
    for path in CATEGORY_TEMPLATE_FILES:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        templates = templates_by_name(document)
        steps = templates[contract.TEMPLATE_CATEGORY]["steps"]

        assert [[step["name"] for step in group] for group in steps] == [
            ["plan"],
            ["group"],
            [contract.TEMPLATE_CONFIRM],
            ["record"],
        ], path.name
        assert steps[1][0]["withParam"] == groups, path.name
        confirm = steps[2][0]
        assert confirm["template"] == contract.TEMPLATE_ROUNDS, path.name
        assert confirm["arguments"]["parameters"] == [{"name": contract.PARAM_ROUND, "value": "1"}], path.name
        assert confirm["when"] == "{{steps.plan.outputs.parameters.confirmable}} == true", path.name


# With the shared runner, which fails when any of its groups failed, confirmation is also skipped when all passed.
def test_the_shared_runner_entrypoint_confirms_only_after_a_failed_group() -> None:
    for path in CATEGORY_TEMPLATE_FILES:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        name = contract.shared_runner_entrypoint(contract.TEMPLATE_CATEGORY)
        steps = templates_by_name(document)[name]["steps"]

        confirm = steps[2][0]
        assert confirm["name"] == contract.TEMPLATE_CONFIRM, path.name
        assert confirm["template"] == contract.shared_runner_entrypoint(contract.TEMPLATE_ROUNDS), path.name
        assert confirm["when"] == (
            "{{steps.plan.outputs.parameters.confirmable}} == true && {{steps.run-groups.status}} != Succeeded"
        ), path.name


def test_the_longest_certification_name_leaves_room_for_generated_and_category_suffixes() -> None:
    document = certification_document("c" * 63, sixty_four_categories())
    loaded = LoadedCertification("long.yaml", parse_certification(document, "long.yaml"))
    (compiled,) = compile_certifications([loaded], catalog=builtin_catalog(), options=CompileOptions())
    workflow = compiled.workflow
    longest_parent = workflow["metadata"]["generateName"] + "abcde"

    assert rendered(name_problems(workflow["metadata"], reserve=index_reserve(workflow))) == []
    for manifest in category_manifests(workflow, longest_parent):
        assert rendered(name_problems(manifest["metadata"])) == []
        assert manifest["metadata"]["labels"][CERTIFICATION] == "c" * 63


def test_a_pinned_name_leaves_room_for_the_category_suffixes() -> None:
    workflow = compile_case(SIXTY_FOUR, CompileOptions(name="p" * 59))
    manifests = category_manifests(workflow, workflow["metadata"]["name"])

    assert rendered(name_problems(workflow["metadata"], reserve=index_reserve(workflow))) == []
    assert max(len(manifest["metadata"]["name"]) for manifest in manifests) == 62


# The checker must be able to fail: each mutation of a valid Workflow is caught, with the right path.
MINIMAL_WORKFLOW: dict[str, Any] = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Workflow",
    "metadata": {"generateName": "minimal-", "labels": {"a": "b"}},
    "spec": {
        "entrypoint": "main",
        "onExit": "cleanup",
        "arguments": {"parameters": [{"name": "category", "value": "{}"}]},
        "templates": [
            {
                "name": "main",
                "steps": [
                    [{"name": "plan", "template": "plan"}],
                    [
                        {
                            "name": "group",
                            "template": "run",
                            "withParam": "{{steps.plan.outputs.parameters.groups}}",
                            "arguments": {"parameters": [{"name": "group", "value": "{{item.name}}"}]},
                        }
                    ],
                ],
            },
            {
                "name": "plan",
                "container": {"image": "i", "env": [{"name": "C", "value": "{{workflow.parameters.category}}"}]},
                "outputs": {"parameters": [{"name": "groups", "valueFrom": {"path": "/tmp/g"}}]},
            },
            {
                "name": "run",
                "inputs": {"parameters": [{"name": "group"}]},
                "container": {"image": "i", "args": ["{{inputs.parameters.group}}", "{{workflow.name}}"]},
            },
            {"name": "cleanup", "container": {"image": "i"}},
        ],
    },
}


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(document: dict[str, Any]) -> None:
        node = document
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return apply


def _delete(path: list[Any]) -> Callable[[dict[str, Any]], None]:
    def apply(document: dict[str, Any]) -> None:
        node = document
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return apply


MUTATIONS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "missing-entrypoint": (_set(["spec", "entrypoint"], "nope"), "spec.entrypoint: template 'nope' does not exist"),
    "missing-on-exit": (_set(["spec", "onExit"], "gone"), "spec.onExit: template 'gone' does not exist"),
    "unknown-step-template": (
        _set(["spec", "templates", 0, "steps", 0, 0, "template"], "planx"),
        "spec.templates[0].steps[0][0].template: template 'planx' does not exist",
    ),
    "duplicate-template": (
        _set(["spec", "templates", 3, "name"], "run"),
        "spec.templates[3].name: template name 'run' is not unique",
    ),
    "input-not-supplied": (
        _set(["spec", "templates", 0, "steps", 1, 0, "arguments"], {"parameters": []}),
        "spec.templates[0].steps[1][0]: input 'group' of template 'run' not supplied",
    ),
    "bad-step-name": (
        _set(["spec", "templates", 0, "steps", 0, 0, "name"], "Plan_1"),
        "spec.templates[0].steps[0][0].name: 'Plan_1' does not match",
    ),
    "bad-parameter-name": (
        _set(["spec", "arguments", "parameters", 0, "name"], "cat egory"),
        "spec.arguments.parameters[0].name: 'cat egory' does not match",
    ),
    "generate-name-too-long": (
        _set(["metadata", "generateName"], "g" * 58 + "-"),
        "metadata.generateName: 59 characters + 5 generated + 0 reserved exceeds 63",
    ),
    "bad-label-value": (_set(["metadata", "labels", "a"], "not valid!"), 'metadata.labels["a"]: '),
    "undeclared-workflow-parameter": (
        _set(["spec", "templates", 1, "container", "env", 0, "value"], "{{workflow.parameters.other}}"),
        "spec.templates[1].container.env[0].value: {{workflow.parameters.other}} does not resolve",
    ),
    "step-tag-in-a-leaf-template": (
        _set(["spec", "templates", 2, "container", "args", 1], "{{steps.plan.status}}"),
        "spec.templates[2].container.args[1]: {{steps.plan.status}} does not resolve",
    ),
    "undeclared-step-output": (
        _set(["spec", "templates", 0, "steps", 1, 0, "withParam"], "{{steps.plan.outputs.parameters.other}}"),
        "spec.templates[0].steps[1][0].withParam: {{steps.plan.outputs.parameters.other}} does not resolve",
    ),
    "undeclared-argument": (
        _set(["spec", "templates", 0, "steps", 0, 0, "arguments"], {"parameters": [{"name": "x", "value": "1"}]}),
        "spec.templates[0].steps[0][0]: argument 'x' is not an input of 'plan'",
    ),
    "item-outside-a-loop": (
        _delete(["spec", "templates", 0, "steps", 1, 0, "withParam"]),
        "spec.templates[0].steps[1][0].arguments.parameters[0].value: {{item.name}} does not resolve",
    ),
}


def test_the_semantic_checker_accepts_the_minimal_valid_workflow() -> None:
    assert rendered(workflow_problems(MINIMAL_WORKFLOW)) == []


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_the_semantic_checker_reports_each_broken_rule_with_its_path(mutation: str) -> None:
    document = copy.deepcopy(MINIMAL_WORKFLOW)
    apply, expected = MUTATIONS[mutation]
    apply(document)

    problems = rendered(workflow_problems(document))

    assert any(problem.startswith(expected) for problem in problems), problems


def test_the_template_ref_checker_reports_unknown_templates_parameters_and_leftover_tags() -> None:
    manifest = category_manifests(compiled_case("gang-none"))[0]  # its name still holds {{workflow.name}}
    manifest["spec"]["arguments"]["parameters"].append({"name": "extra", "value": "x"})
    unknown = copy.deepcopy(manifest)
    unknown["spec"]["workflowTemplateRef"]["name"] = "nvcre-nope"

    assert rendered(template_ref_problems(manifest, committed_templates())) == [
        "spec.arguments.parameters: 'extra' is not a parameter of the template",
        "metadata.name: unexpected template tag {{workflow.name}}",
        "metadata.annotations.workflows.argoproj.io/description: unexpected template tag {{workflow.name}}",
    ]
    assert rendered(template_ref_problems(unknown, committed_templates())) == [
        "spec.workflowTemplateRef.name: no WorkflowTemplate 'nvcre-nope'"
    ]


# --------------------------------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("case", ALL_CASES)
def test_compiling_twice_in_one_process_gives_the_same_bytes(case: str) -> None:
    assert dump_yaml(compile_case(case)) == dump_yaml(compile_case(case))


def _compile_in_subprocess(path: Path, hash_seed: str) -> str:
    environment = {**os.environ, "PYTHONHASHSEED": hash_seed}
    completed = subprocess.run(
        [str(COMPILE_SCRIPT), str(path)], capture_output=True, check=True, env=environment, timeout=120
    )
    return completed.stdout.decode("utf-8")


@pytest.mark.parametrize("case", [SEED, SIXTY_FOUR])
def test_processes_with_different_hash_seeds_print_identical_bytes(case: str, tmp_path: Path) -> None:
    if case == SEED:
        path = SEED_EXAMPLE
    else:
        path = tmp_path / "sixty-four.yaml"
        path.write_text(dump_yaml(certification_document("sixty-four", sixty_four_categories())), encoding="utf-8")

    outputs = {_compile_in_subprocess(path, seed) for seed in ("0", "1", "4242")}

    assert len(outputs) == 1
    assert outputs.pop() == f"---\n{compiled_yaml(case)}"


# ---------------------------------------------------------------------------------------------------- the CLI


def invoke(*args: str) -> Any:
    return CliRunner().invoke(compile_command, list(args), prog_name="nvcre-compile", catch_exceptions=False)


def write_certification(directory: Path, file_name: str, document: dict[str, Any]) -> Path:
    path = directory / file_name
    path.write_text(dump_yaml(document), encoding="utf-8")
    return path


ERROR_CASES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "unknown-category": (
        certification_document(
            "unknown",
            [ALL_REDUCE, {"domain": "communication", "variant": "nccl-nope"}, {"domain": "x", "variant": "y"}],
        ),
        [
            'spec.categories[1]: no catalog entry "communication/nccl-nope"; known: communication/',
            'spec.categories[2]: no catalog entry "x/y"; known: ',
        ],
    ),
    "queue-label-conflict": (
        certification_document(
            "conflict",
            [
                ALL_REDUCE,
                {**NEMOTRON, "options": {"workloadMetadata": {"labels": {"runai/queue": "team-c"}}}},
            ],
            gangScheduler=RUNAI,
            workloadMetadata={"labels": {"runai/queue": "team-b"}},
        ),
        [
            'spec.workloadMetadata.labels["runai/queue"]: conflicting label value "team-b", expected "team-a"',
            'spec.categories[1].options.workloadMetadata.labels["runai/queue"]: conflicting label value "team-c", '
            'expected "team-a"',
        ],
    ),
    "name-too-long": (
        certification_document("n" * 64, [ALL_REDUCE, {"domain": "x", "variant": "y"}]),
        [
            "metadata.name: must be at most 63 characters to compile, got 64",
            'spec.categories[1]: no catalog entry "x/y"; known: ',
        ],
    ),
}


@pytest.mark.parametrize("error_case", ERROR_CASES)
def test_a_certification_that_cannot_compile_prints_every_error_and_nothing_else(
    error_case: str, tmp_path: Path
) -> None:
    document, expected = ERROR_CASES[error_case]
    path = write_certification(tmp_path, "cert.yaml", document)

    result = invoke(str(path))

    lines = result.stderr.splitlines()
    assert result.exit_code == 1
    assert result.stdout == ""
    assert len(lines) == len(expected) + 1
    for line, start in zip(lines, expected, strict=False):
        assert line.startswith(f"{path}: {start}")
    assert lines[-1] == f"{len(expected)} problems found"


def test_one_bad_certification_among_good_ones_writes_nothing(tmp_path: Path) -> None:
    bad = write_certification(tmp_path, "bad.yaml", ERROR_CASES["unknown-category"][0])
    out = tmp_path / "out"

    result = invoke(str(SEED_EXAMPLE), str(bad), "-o", str(out))

    assert result.exit_code == 1
    assert result.stdout == ""
    assert not out.exists()


def test_output_directory_gets_one_name_dot_yaml_file_per_certification(tmp_path: Path) -> None:
    result = invoke(str(SEED_EXAMPLE), "-o", str(tmp_path))

    assert result.exit_code == 0
    assert result.stdout == ""
    assert [path.name for path in tmp_path.iterdir()] == ["gpu-cluster-cert.yaml"]
    assert (tmp_path / "gpu-cluster-cert.yaml").read_text(encoding="utf-8") == compiled_yaml(SEED)
    assert result.stderr == f"wrote {tmp_path / 'gpu-cluster-cert.yaml'}\n"


def test_check_passes_on_up_to_date_output_and_shows_a_diff_when_stale(tmp_path: Path) -> None:
    invoke(str(SEED_EXAMPLE), "-o", str(tmp_path))
    fresh = invoke(str(SEED_EXAMPLE), "--check", str(tmp_path))
    committed = tmp_path / "gpu-cluster-cert.yaml"
    committed.write_text(committed.read_text(encoding="utf-8").replace("cpu: 100m", "cpu: 50m"), encoding="utf-8")

    stale = invoke(str(SEED_EXAMPLE), "--check", str(tmp_path))

    assert (fresh.exit_code, fresh.stdout) == (0, "")
    assert stale.exit_code == 1
    assert stale.stdout.startswith(f"--- {committed}\n+++ {committed} (compiled)\n@@ ")
    assert "\n-          cpu: 50m\n" in stale.stdout
    assert "\n+          cpu: 100m\n" in stale.stdout
    assert stale.stderr == f"1 compiled file(s) in {tmp_path} are stale; run nvcre-compile -o {tmp_path}\n"


def test_check_reports_a_missing_file_as_stale(tmp_path: Path) -> None:
    result = invoke(str(SEED_EXAMPLE), "--check", str(tmp_path))

    assert result.exit_code == 1
    assert "+kind: Workflow\n" in result.stdout


def test_json_output_is_the_same_object_as_the_yaml_output() -> None:
    as_yaml = invoke(str(SEED_EXAMPLE))
    as_json = invoke(str(SEED_EXAMPLE), "--format", "json")

    assert (as_yaml.exit_code, as_json.exit_code) == (0, 0)
    assert json.loads(as_json.stdout) == yaml.safe_load(as_yaml.stdout) == compiled_case(SEED)


def test_name_pins_the_workflow_name_instead_of_generating_one() -> None:
    result = invoke(str(SEED_EXAMPLE), "--name", "gpu-cert-2026-01")
    metadata = yaml.safe_load(result.stdout)["metadata"]

    assert result.exit_code == 0
    assert metadata["name"] == "gpu-cert-2026-01"
    assert "generateName" not in metadata


def test_a_pinned_name_too_long_for_the_category_workflows_is_an_error() -> None:
    result = invoke(str(SEED_EXAMPLE), "--name", "p" * 60)

    assert result.exit_code == 2  # a usage error: the option, not the document, is wrong
    assert result.stdout == ""
    assert "must be at most 59 characters" in result.stderr


# A pinned name must be a DNS-1123 label (Argo also puts it in a label value).
def test_a_pinned_name_that_is_not_a_dns_label_is_an_error() -> None:
    result = invoke(str(SEED_EXAMPLE), "--name", "Bad_Name")

    assert result.exit_code != 0
    assert result.stdout == ""


def test_the_step_image_is_used_by_every_step_of_the_certification_workflow() -> None:
    result = invoke(str(SEED_EXAMPLE), "--step-image", "registry.example.com/nvcre-argo:test")
    workflow = yaml.safe_load(result.stdout)
    images = {template["container"]["image"] for template in workflow["spec"]["templates"] if "container" in template}

    assert result.exit_code == 0
    assert images == {"registry.example.com/nvcre-argo:test"}
    assert templates_by_name(compiled_case(SEED))[contract.TEMPLATE_VERDICT]["container"]["image"] == (
        contract.DEFAULT_STEP_IMAGE
    )


def test_the_namespace_option_overrides_the_certifications_namespace() -> None:
    result = invoke(str(SEED_EXAMPLE), "--namespace", "certify")

    assert result.exit_code == 0
    assert yaml.safe_load(result.stdout)["metadata"]["namespace"] == "certify"
    assert compiled_case(SEED)["metadata"]["namespace"] == "nvcre"


# --------------------------------------------------------------------------------------------- workflow_templates/


def invoke_templates(*args: str) -> Any:
    return CliRunner().invoke(cli, ["templates", *args], prog_name="nvcre-argo", catch_exceptions=False)


def test_the_committed_workflow_templates_are_up_to_date() -> None:
    result = invoke_templates("--check", "-o", str(TEMPLATES_DIR))

    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_templates_check_fails_with_a_diff_on_a_stale_or_extra_file(tmp_path: Path) -> None:
    copied = tmp_path / "workflow_templates"
    shutil.copytree(TEMPLATES_DIR, copied)
    stale = copied / TEMPLATE_FILES[0].name
    stale.write_text(stale.read_text(encoding="utf-8").replace("retryPolicy: OnError", "retryPolicy: Always"))
    (copied / "leftover.yaml").write_text("kind: WorkflowTemplate\n", encoding="utf-8")

    result = invoke_templates("--check", "-o", str(copied))

    assert result.exit_code == 1
    assert re.search(r"^-\s+retryPolicy: Always$", result.stdout, re.MULTILINE)
    assert re.search(r"^\+\s+retryPolicy: OnError$", result.stdout, re.MULTILINE)
    assert f"{copied / 'leftover.yaml'}: not generated from the catalog" in result.stderr
