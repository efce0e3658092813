"""Strict JSON-schema validators for the third-party objects we generate, built from their real CRDs.

Why: an API server prunes unknown fields silently, and Hera and the Trainer models accept anything, so a typo in
a generated manifest (`sucessCondition`, `runtimePatch`) would only show up as a feature that does nothing on a
cluster. The CRDs are taken from the Go module cache at the versions pinned in `hack/testbin/versions.env` (the
one source of truth; never vendored), and made strict the way the research notes prescribe
(`argo-hera-trainer.md` §1.13):

* every object node with `properties` and neither `additionalProperties` nor
  `x-kubernetes-preserve-unknown-fields` gets `additionalProperties: false`;
* int-or-string nodes accept an integer or a string; `nullable: true` nodes also accept null;
* every `x-kubernetes-*` key is dropped (CEL rules are not evaluated here; re-check the important ones);
* the root's `apiVersion` and `kind` must be the CRD's, and the root `metadata` (which CRDs leave as a bare
  `type: object`) gets a strict ObjectMeta schema, so label values must be strings.

Anything missing (no `go`, a module that cannot be downloaded, a file not where it should be) raises
`CrdSchemaError` with the details: these tests must fail loudly, never skip.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from jsonschema.exceptions import ValidationError, best_match

from tests.harness.versions import HarnessSetupError, load_versions
from tests.harness.versions import module_dir as harness_module_dir

REPO_ROOT = Path(__file__).resolve().parents[2]
VERSIONS_ENV = REPO_ROOT / "hack" / "testbin" / "versions.env"
ARGO_VERSIONS = ("v3", "v4")
GO_TIMEOUT_SECONDS = 600

JsonObject = dict[str, Any]


class CrdSchemaError(RuntimeError):
    """A CRD schema could not be found or loaded (Go missing, module not downloadable, file moved)."""


@dataclass(frozen=True)
class CrdSource:
    """Where one kind's CRD lives: a module (by its `versions.env` key prefix) and a file inside it."""

    env_prefix: str
    path: str


_TRAINER_CRDS = "manifests/base/crds"
_ARGO_CRDS = "manifests/base/crds/full"
_SOURCES: Mapping[str, CrdSource] = {
    "TrainJob": CrdSource("TRAINER", f"{_TRAINER_CRDS}/trainer.kubeflow.org_trainjobs.yaml"),
    "TrainingRuntime": CrdSource("TRAINER", f"{_TRAINER_CRDS}/trainer.kubeflow.org_trainingruntimes.yaml"),
    "ClusterTrainingRuntime": CrdSource(
        "TRAINER", f"{_TRAINER_CRDS}/trainer.kubeflow.org_clustertrainingruntimes.yaml"
    ),
    "JobSet": CrdSource("JOBSET", "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"),
}
_ARGO_FILES: Mapping[str, str] = {
    "Workflow": f"{_ARGO_CRDS}/argoproj.io_workflows.yaml",
    "WorkflowTemplate": f"{_ARGO_CRDS}/argoproj.io_workflowtemplates.yaml",
    "ClusterWorkflowTemplate": f"{_ARGO_CRDS}/argoproj.io_clusterworkflowtemplates.yaml",
    "CronWorkflow": f"{_ARGO_CRDS}/argoproj.io_cronworkflows.yaml",
}
ARGO_KINDS = tuple(_ARGO_FILES)
KINDS = (*_SOURCES, *ARGO_KINDS)

_STRING_MAP: JsonObject = {"type": "object", "additionalProperties": {"type": "string"}}
_OWNER_REFERENCE: JsonObject = {
    "type": "object",
    "required": ["apiVersion", "kind", "name", "uid"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "name": {"type": "string"},
        "uid": {"type": "string"},
        "controller": {"type": "boolean"},
        "blockOwnerDeletion": {"type": "boolean"},
    },
}
# The writable and server-filled fields of metav1.ObjectMeta (CRDs do not carry its schema at the root).
_OBJECT_META: JsonObject = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
        "ownerReferences": {"type": "array", "items": _OWNER_REFERENCE},
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "uid": {"type": "string"},
        "resourceVersion": {"type": "string"},
        "generation": {"type": "integer"},
        "creationTimestamp": {"type": ["string", "null"]},
        "deletionTimestamp": {"type": ["string", "null"]},
        "deletionGracePeriodSeconds": {"type": "integer"},
        "managedFields": {"type": "array", "items": {"type": "object"}},
        "selfLink": {"type": "string"},
    },
}


@functools.cache
def pinned_versions() -> dict[str, str]:
    """The pinned versions, keyed as in `versions.env` (`TRAINER_MODULE`, `TRAINER_VERSION`, ...)."""
    try:
        return load_versions()
    except ValueError as error:
        raise CrdSchemaError(str(error)) from error


def _pinned(key: str) -> str:
    versions = pinned_versions()
    if not versions.get(key):
        raise CrdSchemaError(f"{VERSIONS_ENV}: no {key}=... line")
    return versions[key]


@functools.cache
def module_dir(module: str, version: str) -> Path:
    """The Go module cache directory of `module@version` (downloaded when not cached yet), cached per process."""
    try:
        return harness_module_dir(module, version)
    except HarnessSetupError as error:
        raise CrdSchemaError(str(error)) from error


def _source(kind: str, argo_version: str | None) -> tuple[str, str, str]:
    """(module, version, file) of a kind's CRD; Argo kinds need `argo_version` ("v3" or "v4")."""
    if kind in _ARGO_FILES:
        if argo_version not in ARGO_VERSIONS:
            raise ValueError(f"{kind} needs argo_version, one of {ARGO_VERSIONS}; got {argo_version!r}")
        prefix = f"ARGO_{argo_version.upper()}"
        return _pinned(f"{prefix}_MODULE"), _pinned(f"{prefix}_VERSION"), _ARGO_FILES[kind]
    if kind not in _SOURCES:
        raise ValueError(f"no CRD source for kind {kind!r}; known kinds: {', '.join(KINDS)}")
    source = _SOURCES[kind]
    return _pinned(f"{source.env_prefix}_MODULE"), _pinned(f"{source.env_prefix}_VERSION"), source.path


@functools.cache
def crd_document(kind: str, argo_version: str | None = None) -> JsonObject:
    """The CustomResourceDefinition of `kind`, as pinned."""
    module, version, relative = _source(kind, argo_version)
    path = module_dir(module, version) / relative
    if not path.is_file():
        raise CrdSchemaError(f"{module}@{version} has no {relative} (looked at {path})")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with path.open(encoding="utf-8") as handle:
        document: JsonObject = yaml.load(handle, Loader=loader)  # a safe loader (C or pure Python)
    found = document.get("spec", {}).get("names", {}).get("kind")
    if found != kind:
        raise CrdSchemaError(f"{path} defines kind {found!r}, expected {kind!r}")
    return document


def _storage_version(crd: JsonObject) -> JsonObject:
    versions = crd["spec"]["versions"]
    return next((version for version in versions if version.get("storage")), versions[0])


def openapi_schema(kind: str, argo_version: str | None = None) -> JsonObject:
    """The CRD's own `openAPIV3Schema` (storage version), unchanged."""
    schema: JsonObject = _storage_version(crd_document(kind, argo_version))["schema"]["openAPIV3Schema"]
    return schema


def make_strict(node: Any) -> Any:
    """A strict copy of an OpenAPI v3 structural schema node (see the module docstring)."""
    if isinstance(node, list):
        return [make_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    strict: JsonObject = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key in ("properties", "patternProperties", "definitions"):
            strict[key] = {name: make_strict(child) for name, child in value.items()}
        elif key in ("enum", "required", "default", "example", "description", "format"):
            strict[key] = value  # data, not schema: must not be rewritten
        else:
            strict[key] = make_strict(value)
    if node.get("x-kubernetes-int-or-string"):
        strict.pop("type", None)
        strict["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if (
        "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        strict["additionalProperties"] = False
    if node.get("nullable"):
        if "type" in strict:
            types = strict["type"] if isinstance(strict["type"], list) else [strict["type"]]
            strict["type"] = [*types, "null"]
        elif "anyOf" in strict:
            strict["anyOf"] = [*strict["anyOf"], {"type": "null"}]
        else:
            strict = {"anyOf": [strict, {"type": "null"}]}
    return strict


@functools.cache
def strict_schema(kind: str, argo_version: str | None = None) -> JsonObject:
    """The strict JSON schema of a whole `kind` object, root apiVersion/kind/metadata pinned down."""
    crd = crd_document(kind, argo_version)
    version = _storage_version(crd)
    schema: JsonObject = make_strict(version["schema"]["openAPIV3Schema"])
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {"const": f"{crd['spec']['group']}/{version['name']}"}
    properties["kind"] = {"const": kind}
    properties["metadata"] = _OBJECT_META
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
    schema["additionalProperties"] = False
    return schema


@functools.cache
def strict_validator(kind: str, argo_version: str | None = None) -> jsonschema.Draft7Validator:
    """A Draft 7 validator of the strict schema; `argo_version` ("v3"/"v4") is required for Argo kinds only."""
    key_version = argo_version if kind in _ARGO_FILES else None
    if key_version != argo_version:
        return strict_validator(kind, key_version)  # one cache entry per schema, whatever callers pass
    return jsonschema.Draft7Validator(strict_schema(kind, argo_version))


def check_strict_schema(kind: str, argo_version: str | None = None) -> None:
    """Raise `jsonschema.SchemaError` if the strict rewrite is not a valid Draft 7 schema (slow on Argo's)."""
    jsonschema.Draft7Validator.check_schema(strict_schema(kind, argo_version))


def format_error_path(path: Any) -> str:
    """`spec.template.spec.replicatedJobs[0].template`, as Kubernetes prints field paths."""
    text = ""
    for element in path:
        if isinstance(element, int):
            text += f"[{element}]"
        elif text and not _is_identifier(str(element)):
            text += f"[{json.dumps(str(element))}]"
        else:
            text += f".{element}" if text else str(element)
    return text or "<root>"


def _is_identifier(text: str) -> bool:
    return bool(text) and all(character.isalnum() or character == "_" for character in text)


def _most_specific(error: ValidationError) -> ValidationError:
    """For an anyOf/oneOf failure, the branch error when it points deeper than the alternative itself."""
    if error.context:
        candidate = best_match(error.context)
        if candidate is not None and len(candidate.absolute_path) > len(error.absolute_path):
            return _most_specific(candidate)
    return error


def iter_validation_errors(kind: str, manifest: Any, argo_version: str | None = None) -> Iterator[ValidationError]:
    yield from strict_validator(kind, argo_version).iter_errors(manifest)


def validation_errors(kind: str, manifest: Any, argo_version: str | None = None) -> list[str]:
    """Every schema violation of `manifest` as a sorted list of `path: message` lines; empty when valid.

    `argo_version` ("v3" or "v4") selects the Argo CRDs and is required for Argo kinds; other kinds ignore it,
    so one call site can validate a mixed list of documents.
    """
    lines = set()
    for error in iter_validation_errors(kind, manifest, argo_version):
        specific = _most_specific(error)
        lines.add(f"{format_error_path(specific.absolute_path)}: {specific.message}")
    return sorted(lines)
