"""Platform arms: data that says how a TrainingRuntime changes on one platform and GPU architecture, and the
loader that reads and checks it.

An arm is a matcher (`when`: platform, GPU architecture, instance type, category domain, GPUs per node) and a
patch (image, environment, worker resources, annotations, tolerations, volumes, sidecars, DRA claims). Arms are
data, not code, for the same reason catalog entries are: a site with another NIC resource name or a new instance
type adds a file with `--catalog DIR` (`DIR/_platform/*.yaml`) and rebuilds nothing. Built-in arms ship as package
data in `nvcre_argo/platform/arms/`. Arms keep the order they are read in (files by name, arms in file order); an extra
arm with a built-in arm's name replaces it in place, a new one is appended. Every problem names its file and
field, like the catalog loader.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from nvcre_argo.errors import CatalogError, format_path
from nvcre_argo.messages import describe_pydantic_error
from nvcre_argo.yamlio import YamlSyntaxError, load_yaml_documents

PLATFORM_DIR = "_platform"
ARM_PLACEHOLDERS = ("mlnxPerNode", "gpusPerNode", "runtimeName")
"""What an arm's resource values, annotations and claim names may use: `%{name}`, filled by `apply`."""
VALUE_KEYS = Literal["mpirun", "ncclBinary"]
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class _ArmModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, alias_generator=to_camel)


class StringMatch(_ArmModel):
    """One value against `equals`, `in`, `notIn` and/or `pattern` (a full-match regular expression); every
    condition given must hold."""

    equals: str | None = None
    in_: list[str] | None = Field(default=None, alias="in")
    not_in: list[str] | None = None
    pattern: str | None = None

    @field_validator("pattern")
    @classmethod
    def _pattern_compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"not a regular expression: {error}") from None
        return pattern

    def matches(self, value: str | None) -> bool:
        if self.equals is not None and value != self.equals:
            return False
        if self.in_ is not None and value not in self.in_:
            return False
        if self.not_in is not None and value in self.not_in:
            return False
        return self.pattern is None or (value is not None and re.fullmatch(self.pattern, value) is not None)


class ArmWhen(_ArmModel):
    """Where an arm applies; an absent key matches anything, so an empty `when` matches every category."""

    platform: StringMatch | None = None
    gpu_architecture: StringMatch | None = None
    instance_type: StringMatch | None = None
    domain: StringMatch | None = None
    mnnvl: bool | None = Field(default=None, description="Only when multi-node NVLink is (true) or is not (false) on.")
    gpus_per_node: list[Annotated[int, Field(ge=1)]] | None = Field(
        default=None,
        min_length=1,
        description="Only when the per-node GPU count is one of these: settings that depend on how many GPUs share "
        "a node's PCIe tree (GKE G4's NCCL_P2P_LEVEL) follow the count the pods request, not the machine name.",
    )


class ArmResources(_ArmModel):
    limits: dict[str, str | int] = Field(default_factory=dict)
    requests: dict[str, str | int] = Field(default_factory=dict)


class ArmPatch(_ArmModel):
    """What an arm changes. Worker fields (resources, annotations, volumes, sidecars, claims) go to the
    catalog entry's `gpuReplicatedJobs`; `env` and `image` go to every replicated job's primary container,
    because an MPI launcher must hold the values it forwards to the ranks (`-x NAME`)."""

    image: str | None = Field(default=None, min_length=1)
    values: dict[VALUE_KEYS, str] = Field(
        default_factory=dict,
        description="Catalog placeholder values that follow the image: the mpirun path, the nccl-tests binary "
        "(`{test}` = the entry's ncclTest, e.g. all_reduce).",
    )
    env: dict[str, str] = Field(default_factory=dict)
    forward_env: list[Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] = Field(
        default_factory=list,
        description="Variables of the image (not set by the arm) an MPI launcher forwards to the ranks too, e.g. "
        "LD_LIBRARY_PATH: ranks started over ssh do not inherit the image's environment.",
    )
    worker_resources: ArmResources | None = None
    capabilities: list[str] = Field(default_factory=list)
    pod_annotations: dict[str, str] = Field(default_factory=dict)
    pod_annotations_per_nic: dict[str, str] = Field(
        default_factory=dict,
        description="Annotation value repeated mlnxPerNode times, comma-joined; left out when mlnxPerNode is 0.",
    )
    job_annotations: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Taints the platform puts on its GPU nodes (arm64, nvidia.com/gpu) that the workers must "
        "tolerate even when the target selects nodes by other taints; kept beside the target's tolerations.",
    )
    volumes: list[dict[str, Any]] = Field(default_factory=list)
    volume_mounts: list[dict[str, Any]] = Field(default_factory=list)
    init_containers: list[dict[str, Any]] = Field(default_factory=list)
    mlnx_per_node: int | None = Field(
        default=None, ge=0, description="The platform's NIC count per node for this GPU, unless mlnxPerNode is set."
    )
    compute_domain: bool = Field(
        default=False, description="Claim the category's ComputeDomain IMEX channel (GB200/GB300 multi-node NVLink)."
    )


class PlatformArm(_ArmModel):
    name: Annotated[str, StringConstraints(pattern=DNS_LABEL, max_length=63)]
    description: str
    when: ArmWhen = Field(default_factory=ArmWhen)
    patch: ArmPatch


class ArmFile(_ArmModel):
    arms: list[PlatformArm] = Field(min_length=1)


def builtin_arms_dir() -> Traversable:
    return resources.files("nvcre_argo.platform") / "arms"


def load_builtin_arms() -> tuple[PlatformArm, ...]:
    return tuple(_load_directory(builtin_arms_dir(), "<built-in arms>"))


def load_extra_arms(catalog_dirs: Sequence[Path]) -> tuple[PlatformArm, ...]:
    """The arms under each `DIR/_platform/` (directories without one add none), in directory order."""
    extra: list[PlatformArm] = []
    for directory in catalog_dirs:
        platform_dir = directory / PLATFORM_DIR
        if platform_dir.is_dir():
            extra += _load_directory(platform_dir, str(platform_dir))
    return tuple(extra)


def merge_arms(base: Sequence[PlatformArm], extra: Sequence[PlatformArm]) -> tuple[PlatformArm, ...]:
    """`extra` on top of `base`: same name replaces in place, a new name is appended (so the order of the
    built-in arms, which later arms rely on, never changes under an override)."""
    merged = list(base)
    for arm in extra:
        index = next((number for number, existing in enumerate(merged) if existing.name == arm.name), None)
        if index is None:
            merged.append(arm)
        else:
            merged[index] = arm
    return tuple(merged)


def _load_directory(directory: Traversable, label: str) -> list[PlatformArm]:
    arms: list[PlatformArm] = []
    seen: dict[str, str] = {}
    for file in sorted(directory.iterdir(), key=lambda item: item.name):
        if not file.name.endswith((".yaml", ".yml")):
            continue
        source = f"{label}/{file.name}"
        for index, arm in enumerate(parse_arm_file(file.read_text(encoding="utf-8"), source)):
            if arm.name in seen:
                raise CatalogError(
                    f"{source}: arms[{index}].name: arm {arm.name!r} is also defined in {seen[arm.name]}"
                )
            seen[arm.name] = source
            arms.append(arm)
    return arms


def parse_arm_file(text: str, source: str) -> list[PlatformArm]:
    """The arms of one file; CatalogError naming the file and every offending field otherwise."""
    try:
        documents = [document for document in load_yaml_documents(text) if document]
    except YamlSyntaxError as error:
        raise CatalogError(f"{source}: invalid YAML: {error}") from None
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise CatalogError(f"{source}: a platform arm file must hold exactly one mapping with `arms:`")
    try:
        parsed = ArmFile.model_validate(documents[0])
    except ValidationError as error:
        problems = "; ".join(
            f"{format_path(tuple(detail['loc']))}: {describe_pydantic_error(detail, {})[1]}"
            for detail in error.errors(include_url=False)
        )
        raise CatalogError(f"{source}: {problems}") from None
    return list(parsed.arms)
