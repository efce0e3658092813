"""Install the CRDs the project depends on into the test control plane, straight from the Go module cache.

Sources, at the versions pinned in ``hack/testbin/versions.env`` (never vendored into the repository):

* Argo Workflows: the *full* CRDs (real OpenAPI schemas, so the apiserver validates what we generate) from the
  v3 module. The v4 CRDs have the same names, so only one set can be installed; v3 is the one installed here.
* Kubeflow Trainer: TrainJob, TrainingRuntime, ClusterTrainingRuntime.
* JobSet: JobSet (Trainer embeds its types).
* Our own ``crds/nvcre.nvidia.com_certifications.yaml`` when it exists.

The Argo full CRDs are megabytes of YAML; client-side apply would overflow the 256 KiB
``last-applied-configuration`` annotation, so every CRD goes in by server-side apply with compact JSON
(JSON is valid YAML, which ``application/apply-patch+yaml`` accepts). Server-side apply is also idempotent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from tests.harness.versions import REPO_ROOT, load_versions, module_dir

CRD_API = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
FIELD_MANAGER = "nvcre-test-harness"
ESTABLISH_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 120.0
MESSAGE_LIMIT = 2000
OWN_CRD = REPO_ROOT / "crds" / "nvcre.nvidia.com_certifications.yaml"
# Our CRD is committed, so its absence is an error, never a silently smaller test surface.
OWN_CRD_REQUIRED = True

ARGO_CRD_DIR = "manifests/base/crds/full"
TRAINER_CRD_FILES = (
    "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
    "manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml",
    "manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
)
JOBSET_CRD_FILES = ("config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",)

JsonObject = dict[str, Any]


class CrdInstallError(RuntimeError):
    """A CRD file is missing or a CRD was rejected or never became Established."""


@dataclass(frozen=True)
class CrdInstallReport:
    """What :func:`install_crds` did: the CRD names and how long applying and establishing took."""

    names: tuple[str, ...]
    apply_seconds: float
    establish_seconds: float

    @property
    def total_seconds(self) -> float:
        return self.apply_seconds + self.establish_seconds


def crd_files(versions: Mapping[str, str] | None = None, *, argo_major: str = "v3") -> list[Path]:
    """Every CRD file to install, from the module cache at the pinned versions (plus ours if present).

    ``argo_major`` picks the Argo Workflows line ("v3" or "v4") whose full CRDs are installed."""
    pinned = versions if versions is not None else load_versions()
    key = argo_major.upper()
    argo = module_dir(pinned[f"ARGO_{key}_MODULE"], pinned[f"ARGO_{key}_VERSION"])
    trainer = module_dir(pinned["TRAINER_MODULE"], pinned["TRAINER_VERSION"])
    jobset = module_dir(pinned["JOBSET_MODULE"], pinned["JOBSET_VERSION"])
    files = sorted((argo / ARGO_CRD_DIR).glob("argoproj.io_*.yaml"))
    if not files:
        raise CrdInstallError(f"no Argo CRDs in {argo / ARGO_CRD_DIR}")
    files += [trainer / f for f in TRAINER_CRD_FILES] + [jobset / f for f in JOBSET_CRD_FILES]
    if OWN_CRD.exists():
        files.append(OWN_CRD)
    elif OWN_CRD_REQUIRED:
        raise CrdInstallError(f"our own CRD {OWN_CRD} is missing")
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise CrdInstallError(f"CRD files missing: {', '.join(map(str, missing))}")
    return files


def load_crds(path: Path) -> list[JsonObject]:
    """The CustomResourceDefinition documents of a (multi-document) YAML file."""
    with path.open(encoding="utf-8") as stream:
        docs = [d for d in yaml.load_all(stream, Loader=yaml.CSafeLoader) if isinstance(d, dict)]
    crds = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
    if not crds:
        raise CrdInstallError(f"{path} holds no CustomResourceDefinition")
    return crds


def compact_json(obj: object) -> str:
    """JSON without insignificant whitespace: the Argo CRDs shrink from ~3 MB of YAML to under 1 MB."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def raw_request(
    api: ApiClient,
    method: str,
    path: str,
    *,
    query: Sequence[tuple[str, str]] = (),
    body: str | None = None,
    content_type: str | None = None,
) -> JsonObject:
    """One authenticated request through ``api``, answering the decoded JSON body.

    The typed client methods would deserialize megabyte-sized CRDs into model objects; this skips that.
    ``body`` is sent verbatim only with a non-JSON content type (e.g. ``application/apply-patch+yaml``): for
    JSON content types the client would encode the string a second time, so those are refused here.
    Raises :class:`ApiException` on any non-2xx answer (its ``body`` holds the apiserver's Status).
    """
    if body is not None and (content_type is None or "json" in content_type):
        raise ValueError(f"a pre-serialized body needs a non-JSON content type, not {content_type!r}")
    headers: dict[str, str] = {"Accept": "application/json"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    method_, url, headers_, _, _ = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=list(query),
        header_params=headers,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(method_, url, header_params=headers_, body=body, _request_timeout=REQUEST_TIMEOUT_S)
    data: bytes = response.read()  # type: ignore[no-untyped-call]
    if not 200 <= response.status < 300:
        raise ApiException(http_resp=response)
    decoded: JsonObject = json.loads(data) if data else {}
    return decoded


def apply_crd(api: ApiClient, crd: Mapping[str, Any]) -> str:
    """Server-side apply one CRD (compact JSON body); returns its name."""
    name = str(crd["metadata"]["name"])
    try:
        raw_request(
            api,
            "PATCH",
            f"{CRD_API}/{name}",
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            body=compact_json(crd),
            content_type="application/apply-patch+yaml",
        )
    except ApiException as exc:
        message = f"applying CRD {name} failed: HTTP {exc.status}: {status_message(exc)}"
        raise CrdInstallError(message) from None  # the Status message says it all; skip the raw HTTP dump
    return name


def status_message(exc: ApiException, limit: int = MESSAGE_LIMIT) -> str:
    """The ``message`` of the apiserver's Status in ``exc`` (the raw body if it is not one), shortened."""
    try:
        message = str(json.loads(exc.body or "")["message"])
    except (ValueError, KeyError, TypeError):
        message = str(exc.body)
    return message if len(message) <= limit else f"{message[:limit]}... ({len(message)} characters)"


def condition_true(obj: Mapping[str, Any], condition_type: str) -> bool:
    """Whether ``status.conditions`` has ``condition_type`` with status ``True``."""
    conditions = obj.get("status", {}).get("conditions") or []
    return any(c.get("type") == condition_type and c.get("status") == "True" for c in conditions)


def wait_established(api: ApiClient, names: Iterable[str], timeout_s: float = ESTABLISH_TIMEOUT_S) -> None:
    """Poll each CRD until its ``Established`` condition is ``True``."""
    pending = list(names)
    deadline = time.monotonic() + timeout_s
    last: dict[str, JsonObject] = {}
    while pending:
        for name in list(pending):
            last[name] = raw_request(api, "GET", f"{CRD_API}/{name}")
            if condition_true(last[name], "Established"):
                pending.remove(name)
        if not pending:
            return
        if time.monotonic() >= deadline:
            details = {n: last[n].get("status", {}).get("conditions") for n in pending}
            raise CrdInstallError(f"CRDs not Established after {timeout_s:.0f} s: {details}")
        time.sleep(0.2)


def install_crds(api: ApiClient, files: Sequence[Path] | None = None) -> CrdInstallReport:
    """Apply every CRD in ``files`` (default: :func:`crd_files`) and wait until all are Established."""
    started = time.monotonic()
    names = tuple(apply_crd(api, crd) for path in (crd_files() if files is None else files) for crd in load_crds(path))
    applied = time.monotonic()
    wait_established(api, names)
    return CrdInstallReport(names=names, apply_seconds=applied - started, establish_seconds=time.monotonic() - applied)
