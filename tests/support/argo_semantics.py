"""Argo Workflows rules that neither the CRD schema nor Hera check, re-implemented for the tests.

Why: an API server accepts any Workflow its CRD schema allows, and Hera serialises dangling references, unknown
templates and unsupplied inputs without a word (`argo-hera-trainer.md` §0.4, §1.13). Argo itself rejects such a
Workflow only when the controller (or `argo lint`) validates it, on a real cluster. These checks follow Argo's
own validator (`workflow/validate/validate.go` at v3.7.18) for the features the generated objects use:

* names: templates and steps match `^[a-zA-Z0-9][-a-zA-Z0-9]*$` and are at most 128 characters, unique (steps
  within their template); parameters match `^[-a-zA-Z0-9_]+$`; a Workflow or WorkflowTemplate name is a
  DNS-1123 label of at most 63 characters (Argo labels every pod with it), and a `generateName` leaves room for
  the 5 random characters the API server appends plus whatever the caller reserves (`-<index>` of children);
* references: the entrypoint and `onExit` templates exist, every step's `template` exists, every input
  parameter with neither `value` nor `default` is supplied by every step calling it (and by the Workflow's
  arguments for the entrypoint), no step passes an argument its template does not declare;
* `{{...}}` tags resolve in the scope Argo gives them: a leaf (container, resource) template sees the global
  `workflow.*` variables, its own `inputs.parameters.*`, `pod.name` and (with a retry strategy) `retries`; a
  step sees the same plus `steps.<step of an earlier group>.*` (outputs only as declared by that step's
  template) and `item`/`item.*` when it loops. A `steps.*` tag inside a leaf template does NOT resolve: Argo
  substitutes a template's body with its inputs only (`failed to resolve {{steps...}}`). The exit handler
  (the `onExit` template) also sees how the Workflow ended, `workflow.status` and `workflow.failures`.

Checks return `Problem`s (a path and a message) rather than raising, so a test can show every problem at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FIELD_NAME = re.compile(r"^[a-zA-Z0-9][-a-zA-Z0-9]*$")
FIELD_NAME_LIMIT = 128
PARAMETER_NAME = re.compile(r"^[-a-zA-Z0-9_]+$")
OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
GENERATE_NAME = re.compile(r"^[a-z0-9][-a-z0-9]*$")
OBJECT_NAME_LIMIT = 63
GENERATED_SUFFIX = 5
LABEL_VALUE = re.compile(r"^$|^[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$")
TAG = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
# The global variables the generated objects may use (a deliberately small subset of Argo's).
WORKFLOW_GLOBALS = frozenset({"workflow.name", "workflow.namespace", "workflow.uid"})
# What Argo adds to the global scope while the exit handler (`spec.onExit`) runs: how the Workflow ended.
EXIT_HANDLER_GLOBALS = frozenset({"workflow.status", "workflow.failures"})
# What `steps.<name>.` exposes for any step, besides its declared output parameters.
STEP_ATTRIBUTES = ("status", "id", "startedAt", "finishedAt", "exitCode")
LEAF_KINDS = ("container", "script", "resource", "suspend", "data", "http", "plugin", "containerSet")


@dataclass(frozen=True)
class Problem:
    """One violation, at a dotted path inside the checked object."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def template_tags(text: str) -> list[str]:
    """The contents of every `{{...}}` tag in `text`, whitespace-trimmed as Argo trims them."""
    return [match.strip() for match in TAG.findall(text)]


def _strings(node: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield from _strings(value, f"{path}.{key}")
    elif isinstance(node, Sequence):
        for index, value in enumerate(node):
            yield from _strings(value, f"{path}[{index}]")


def _parameters(holder: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return list((holder or {}).get("parameters") or [])


def _templates(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(spec.get("templates") or [])


# ---------------------------------------------------------------------------------------------------------- names


def name_problems(metadata: Mapping[str, Any], *, reserve: int = 0) -> list[Problem]:
    """The object's name (or generateName) is a DNS label leaving `reserve` characters for derived names."""
    problems = []
    name, prefix = metadata.get("name"), metadata.get("generateName")
    if name is None and prefix is None:
        return [Problem("metadata", "neither name nor generateName is set")]
    if name is not None:
        if not OBJECT_NAME.fullmatch(name):
            problems.append(Problem("metadata.name", f"{name!r} is not a DNS-1123 label"))
        if len(name) + reserve > OBJECT_NAME_LIMIT:
            problems.append(
                Problem(
                    "metadata.name",
                    f"{len(name)} characters + {reserve} reserved exceeds {OBJECT_NAME_LIMIT}",
                )
            )
    if prefix is not None:
        if not GENERATE_NAME.fullmatch(prefix):
            problems.append(Problem("metadata.generateName", f"{prefix!r} is not a DNS-1123 label prefix"))
        if len(prefix) + GENERATED_SUFFIX + reserve > OBJECT_NAME_LIMIT:
            problems.append(
                Problem(
                    "metadata.generateName",
                    f"{len(prefix)} characters + {GENERATED_SUFFIX} generated + {reserve} reserved "
                    f"exceeds {OBJECT_NAME_LIMIT}",
                )
            )
    return problems


def label_problems(metadata: Mapping[str, Any], path: str = "metadata") -> list[Problem]:
    """Every label value is a valid Kubernetes label value (the CRD schema only says `string`)."""
    return [
        Problem(f'{path}.labels["{key}"]', f"{value!r} is not a valid label value")
        for key, value in (metadata.get("labels") or {}).items()
        if not isinstance(value, str) or not LABEL_VALUE.fullmatch(value)
    ]


def _field_name_problems(path: str, name: Any) -> list[Problem]:
    if not isinstance(name, str) or not FIELD_NAME.fullmatch(name):
        return [Problem(path, f"{name!r} does not match {FIELD_NAME.pattern}")]
    if len(name) > FIELD_NAME_LIMIT:
        return [Problem(path, f"{name!r} is longer than {FIELD_NAME_LIMIT} characters")]
    return []


def _parameter_name_problems(path: str, parameters: list[Mapping[str, Any]]) -> list[Problem]:
    problems = []
    seen: set[str] = set()
    for index, parameter in enumerate(parameters):
        name = parameter.get("name")
        if not isinstance(name, str) or not PARAMETER_NAME.fullmatch(name):
            problems.append(Problem(f"{path}[{index}].name", f"{name!r} does not match {PARAMETER_NAME.pattern}"))
        elif name in seen:
            problems.append(Problem(f"{path}[{index}].name", f"{name!r} is not unique"))
        seen.add(str(name))
    return problems


# ----------------------------------------------------------------------------------------------------- structure


def _required_inputs(template: Mapping[str, Any]) -> set[str]:
    return {
        parameter["name"]
        for parameter in _parameters(template.get("inputs"))
        if "value" not in parameter and "default" not in parameter
    }


def _declared_inputs(template: Mapping[str, Any]) -> set[str]:
    return {parameter["name"] for parameter in _parameters(template.get("inputs"))}


def structure_problems(document: Mapping[str, Any]) -> list[Problem]:
    """Template and step names, references and input supply of a Workflow or WorkflowTemplate with templates."""
    spec = document.get("spec") or {}
    templates = _templates(spec)
    problems: list[Problem] = []
    by_name: dict[str, Mapping[str, Any]] = {}
    for index, template in enumerate(templates):
        path = f"spec.templates[{index}]"
        name = template.get("name")
        problems += _field_name_problems(f"{path}.name", name)
        if name in by_name:
            problems.append(Problem(f"{path}.name", f"template name {name!r} is not unique"))
        by_name[str(name)] = template
        problems += _parameter_name_problems(f"{path}.inputs.parameters", _parameters(template.get("inputs")))
        problems += _parameter_name_problems(f"{path}.outputs.parameters", _parameters(template.get("outputs")))
        kinds = [kind for kind in (*LEAF_KINDS, "steps", "dag") if kind in template]
        if len(kinds) != 1:
            problems.append(Problem(path, f"must have exactly one template type, has {kinds or 'none'}"))
    problems += _parameter_name_problems("spec.arguments.parameters", _parameters(spec.get("arguments")))
    workflow_arguments = {parameter["name"] for parameter in _parameters(spec.get("arguments"))}
    for field in ("entrypoint", "onExit"):
        target = spec.get(field)
        if target is None:
            if field == "entrypoint" and document.get("kind") == "Workflow":
                problems.append(Problem("spec.entrypoint", "a Workflow with templates needs an entrypoint"))
            continue
        if target not in by_name:
            problems.append(Problem(f"spec.{field}", f"template {target!r} does not exist"))
            continue
        missing = _required_inputs(by_name[target]) - workflow_arguments
        if missing:
            problems.append(Problem(f"spec.{field}", f"inputs {sorted(missing)} of {target!r} are never supplied"))
    for index, template in enumerate(templates):
        problems += _step_problems(f"spec.templates[{index}]", template, by_name)
    return problems


def _step_problems(path: str, template: Mapping[str, Any], by_name: Mapping[str, Mapping[str, Any]]) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[str] = set()
    for group_index, group in enumerate(template.get("steps") or []):
        if not group:
            problems.append(Problem(f"{path}.steps[{group_index}]", "empty step group"))
        for step_index, step in enumerate(group or []):
            step_path = f"{path}.steps[{group_index}][{step_index}]"
            name = step.get("name")
            problems += _field_name_problems(f"{step_path}.name", name)
            if name in seen:
                problems.append(Problem(f"{step_path}.name", f"step name {name!r} is not unique in its template"))
            seen.add(str(name))
            if "templateRef" in step or "inline" in step or "template" not in step:
                problems.append(Problem(step_path, "only `template:` references are supported by this checker"))
                continue
            target = by_name.get(step["template"])
            if target is None:
                problems.append(Problem(f"{step_path}.template", f"template {step['template']!r} does not exist"))
                continue
            arguments = _parameters(step.get("arguments"))
            problems += _parameter_name_problems(f"{step_path}.arguments.parameters", arguments)
            supplied = {argument.get("name") for argument in arguments}
            for missing in sorted(_required_inputs(target) - supplied):
                problems.append(Problem(step_path, f"input {missing!r} of template {step['template']!r} not supplied"))
            for extra in sorted(str(name) for name in supplied - _declared_inputs(target)):
                problems.append(Problem(step_path, f"argument {extra!r} is not an input of {step['template']!r}"))
    return problems


# ------------------------------------------------------------------------------------------------------------ tags


def _global_scope(spec: Mapping[str, Any]) -> set[str]:
    declared = {f"workflow.parameters.{parameter['name']}" for parameter in _parameters(spec.get("arguments"))}
    return set(WORKFLOW_GLOBALS) | declared


def _step_exports(step: Mapping[str, Any], by_name: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """What later step groups may reference of `step`."""
    name = step.get("name")
    exported = {f"steps.{name}.{attribute}" for attribute in STEP_ATTRIBUTES}
    target = by_name.get(step.get("template", ""), {})
    exported |= {
        f"steps.{name}.outputs.parameters.{parameter['name']}" for parameter in _parameters(target.get("outputs"))
    }
    if "container" in target or "script" in target:
        exported.add(f"steps.{name}.outputs.result")
    if "withParam" in step or "withItems" in step:
        # A fan-out's aggregate (processAggregateNodeOutputs): a JSON list of its succeeded items' outputs.
        exported.add(f"steps.{name}.outputs.parameters")
    return exported


def _unresolved(node: Any, path: str, scope: set[str], *, items: bool) -> list[Problem]:
    problems = []
    for string_path, text in _strings(node, path):
        for tag in template_tags(text):
            if tag in scope or (items and (tag == "item" or tag.startswith("item."))):
                continue
            problems.append(Problem(string_path, f"{{{{{tag}}}}} does not resolve in this scope"))
    return problems


def tag_problems(document: Mapping[str, Any]) -> list[Problem]:
    """Every `{{...}}` tag resolves where Argo would substitute it (see the module docstring)."""
    spec = document.get("spec") or {}
    templates = _templates(spec)
    by_name = {str(template.get("name")): template for template in templates}
    scope = _global_scope(spec)
    outside = {key: value for key, value in spec.items() if key != "templates"}
    problems = _unresolved(outside, "spec", scope, items=False)
    problems += _unresolved(document.get("metadata") or {}, "metadata", set(), items=False)
    for index, template in enumerate(templates):
        path = f"spec.templates[{index}]"
        own = scope | {f"inputs.parameters.{name}" for name in _declared_inputs(template)}
        if template.get("name") == spec.get("onExit"):
            own |= EXIT_HANDLER_GLOBALS
        if "steps" in template:
            rest = {key: value for key, value in template.items() if key != "steps"}
            problems += _unresolved(rest, path, own, items=False)
            earlier: set[str] = set()
            for group_index, group in enumerate(template["steps"] or []):
                for step_index, step in enumerate(group or []):
                    loops = "withParam" in step or "withItems" in step
                    step_path = f"{path}.steps[{group_index}][{step_index}]"
                    problems += _unresolved(step, step_path, own | earlier, items=loops)
                for step in group or []:
                    earlier |= _step_exports(step, by_name)
        else:
            leaf = own | {"pod.name"}
            if "retryStrategy" in template:
                leaf.add("retries")
            leaf |= {
                f"outputs.parameters.{parameter['name']}.path" for parameter in _parameters(template.get("outputs"))
            }
            rest = {key: value for key, value in template.items() if key != "metrics"}
            problems += _unresolved(rest, path, leaf, items=False)
            problems += _unresolved(
                template.get("metrics") or {}, f"{path}.metrics", own | _metric_scope(template), items=False
            )
    return problems


def _metric_scope(template: Mapping[str, Any]) -> set[str]:
    """What Argo substitutes in a template's own `metrics` once the step ended: its duration, status and exit
    code, and its output parameters (`computeMetrics`' local scope)."""
    outputs = {f"outputs.parameters.{parameter['name']}" for parameter in _parameters(template.get("outputs"))}
    return {"duration", "status", "exitCode"} | outputs


def loose_tag_problems(document: Mapping[str, Any]) -> list[Problem]:
    """The weaker rule: every tag names `workflow.*`, a step that exists somewhere in the object, or an input
    parameter some template declares."""
    step_names = {
        step.get("name")
        for template in _templates(document.get("spec") or {})
        for group in template.get("steps") or []
        for step in group or []
    }
    input_names = {
        parameter.get("name")
        for template in _templates(document.get("spec") or {})
        for parameter in (template.get("inputs") or {}).get("parameters") or []
    }
    problems = []
    for path, text in _strings(document, ""):
        for tag in template_tags(text):
            root, _, rest = tag.partition(".")
            if root == "workflow" and rest:
                continue
            if root == "steps" and rest.partition(".")[0] in step_names:
                continue
            if root == "inputs" and rest.removeprefix("parameters.") in input_names:
                continue
            if ".metrics." in path and (tag in ("duration", "status", "exitCode") or root == "outputs"):
                continue
            problems.append(Problem(path.lstrip("."), f"{{{{{tag}}}}} names neither workflow.* nor an existing step"))
    return problems


# --------------------------------------------------------------------------------------------- workflowTemplateRef


def template_ref_problems(workflow: Mapping[str, Any], templates: Mapping[str, Mapping[str, Any]]) -> list[Problem]:
    """A Workflow that runs a WorkflowTemplate: the template exists, arguments match its parameters, no tags."""
    spec = workflow.get("spec") or {}
    problems: list[Problem] = []
    if spec.get("templates"):
        problems.append(Problem("spec.templates", "must be empty when spec.workflowTemplateRef is set"))
    reference = spec.get("workflowTemplateRef") or {}
    target = templates.get(reference.get("name", ""))
    if target is None:
        return [*problems, Problem("spec.workflowTemplateRef.name", f"no WorkflowTemplate {reference.get('name')!r}")]
    declared = {parameter["name"]: parameter for parameter in _parameters(target["spec"].get("arguments"))}
    supplied = [parameter.get("name") for parameter in _parameters(spec.get("arguments"))]
    problems += _parameter_name_problems("spec.arguments.parameters", _parameters(spec.get("arguments")))
    for name in supplied:
        if name not in declared:
            problems.append(Problem("spec.arguments.parameters", f"{name!r} is not a parameter of the template"))
    for name, parameter in declared.items():
        if name not in supplied and "value" not in parameter and "default" not in parameter:
            problems.append(Problem("spec.arguments.parameters", f"template parameter {name!r} is not supplied"))
    for path, text in _strings(workflow, ""):
        for tag in template_tags(text):
            problems.append(Problem(path.lstrip("."), f"unexpected template tag {{{{{tag}}}}}"))
    return problems


def workflow_problems(document: Mapping[str, Any], *, reserve: int = 0) -> list[Problem]:
    """Names, labels, structure and tag scopes of a Workflow or WorkflowTemplate that carries its templates."""
    metadata = document.get("metadata") or {}
    return [
        *name_problems(metadata, reserve=reserve),
        *label_problems(metadata),
        *structure_problems(document),
        *tag_problems(document),
    ]
