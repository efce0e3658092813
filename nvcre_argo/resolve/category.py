"""Resolve every category of a Certification against the catalog: the compile-time half of resolution.

Everything that does not need the cluster is decided here and fails here, with a field path: the catalog
entry, merged options, workload labels, gang scheduler, resources, image, pull secrets, source repository and
thresholds. What needs the cluster (the nodes, their GPU architecture and what depends on it, the groups) is
left for the plan step, which finishes the job with `finalize` (same code, run time). The result is a
serialisable model because the compiler embeds it in each category's Workflow for the steps to read.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from nvcre_argo.api.options import CategoryOptions
from nvcre_argo.api.spec import CertificationSpec, TargetSpec
from nvcre_argo.catalog.loader import Catalog
from nvcre_argo.catalog.model import CatalogEntry
from nvcre_argo.errors import FieldError
from nvcre_argo.platform.arms import PlatformArm
from nvcre_argo.quantity import parse_quantity
from nvcre_argo.resolve.duration import duration_seconds
from nvcre_argo.resolve.labels import GangScheduling, merge_workload_labels, resolve_gang
from nvcre_argo.resolve.options import EffectiveOptions, merge_options
from nvcre_argo.resolve.thresholds import resolve_thresholds
from nvcre_argo.resolve.unimplemented import unimplemented_option_errors

DIAGNOSE_DOMAIN = "communication"
# The reference's default wait for a finished workload's measurement (nvcre-contract.md §3.3, §7.9).
DEFAULT_MEASUREMENT_TIMEOUT = "5m"
# The reference Job's startupStallTimeoutSeconds when neither the category nor its catalog entry sets one.
DEFAULT_STARTUP_STALL_TIMEOUT_SECONDS = 1200
# The reference's checkpoint PVC size (nvcre-contract.md §3.3).
DEFAULT_CHECKPOINT_STORAGE_SIZE = "10Ti"
DEFAULT_LIMITS = {"cpu": "128", "memory": "800Gi"}
DEFAULT_REQUESTS = {"cpu": "64", "memory": "500Gi"}


class _Resolved(BaseModel):
    """camelCase in JSON like the rest of the API, so the compiled category argument reads as one dialect."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)


class ResolvedGang(_Resolved):
    scheduler_name: str
    queue: str
    queue_label_key: str


class ResolvedResources(_Resolved):
    """CPU/memory of training containers; each of the four values fell back to its default on its own."""

    limits: dict[str, str]
    requests: dict[str, str]
    # The values the user set (`limits.cpu`, ...), None when all four are defaults: a platform arm's CPU and
    # memory (AWS p5) replace the defaults but never a value the user chose.
    explicit: tuple[str, ...] | None = None


class ResolvedCheckpoint(_Resolved):
    """`enableCheckpoint: true` on a training entry: the PVC the category's pods checkpoint to, and how many
    times a failed workload may resume from its last checkpoint (nvcre-contract.md §7.10)."""

    storage_size: str = DEFAULT_CHECKPOINT_STORAGE_SIZE
    storage_class_name: str | None = None
    max_restarts: int = 0


class ResolvedCategory(_Resolved):
    """One category, resolved as far as possible without the cluster."""

    index: int
    domain: str
    variant: str
    entry: CatalogEntry
    options: CategoryOptions
    target: TargetSpec
    workload_labels: dict[str, str]
    gang: ResolvedGang | None = None
    resources: ResolvedResources | None = None
    image: str | None = None
    image_pull_secrets: list[str]
    source_repo: str | None = None
    thresholds: dict[str, str]
    timeout_per_job: str
    # A default, not a required field, so a Workflow compiled before the option existed still parses.
    measurement_timeout: str = DEFAULT_MEASUREMENT_TIMEOUT
    enable_mnnvl: bool | None = Field(default=None, alias="enableMNNVL")
    checkpoint: ResolvedCheckpoint | None = None
    gpu_architecture: str | None = None
    # `nvcre-compile --platform`: the platform the plan step uses instead of detecting one from the nodes.
    platform: str | None = None
    # Platform arms from `--catalog DIR/_platform/`, carried to the plan step (which has only the built-in ones).
    platform_arms: tuple[PlatformArm, ...] | None = None

    @property
    def key(self) -> str:
        return f"{self.domain}/{self.variant}"

    @property
    def measurement_wait_seconds(self) -> int:
        """How long the run step may wait for a finished workload's measurement to appear in its log: none
        when the verdict is the exit code (DCGM), which is known the moment the workload ends."""
        if self.entry.measurement == "exit-code":
            return 0
        return duration_seconds(self.measurement_timeout)

    @property
    def startup_stall_seconds(self) -> int | None:
        """The startup-stall budget of the run step's stall detection (`steps.stall`): the category's
        `startupStallTimeoutSeconds`, else its catalog entry's default. None for an entry whose workload prints
        no training iterations to watch, where the option has no effect, as in the reference (it is only
        effective on a Job with a stallMultiplier, which only the training entries set)."""
        if self.entry.measurement != "megatron-goodput":
            return None
        return (
            self.options.startup_stall_timeout_seconds
            or self.entry.defaults.startup_stall_timeout_seconds
            or DEFAULT_STARTUP_STALL_TIMEOUT_SECONDS
        )


def resolve_certification(spec: CertificationSpec, catalog: Catalog) -> tuple[list[ResolvedCategory], list[FieldError]]:
    """Every category resolved, or every error found across all of them (options the tool does not implement
    first, then category by category)."""
    gang = resolve_gang(spec)
    resolved: list[ResolvedCategory] = []
    errors: list[FieldError] = unimplemented_option_errors(spec)
    for index, category in enumerate(spec.categories):
        entry = catalog.find(category.domain, category.variant)
        if entry is None:
            errors.append(_unknown_category(index, category.domain, category.variant, catalog))
            continue
        result, category_errors = _resolve_category(spec, index, entry, gang)
        # A global value's problem shows up once per category; say it once.
        errors.extend(error for error in category_errors if error not in errors)
        if result is not None:
            resolved.append(result)
    return resolved, errors


def resolution_warnings(spec: CertificationSpec, catalog: Catalog) -> list[FieldError]:
    """What resolving leaves out without failing, for the user to hear about: spec-level thresholds dropped for
    a category that cannot measure them (see `resolve/thresholds.py`), in category order."""
    warnings: list[FieldError] = []
    for index, category in enumerate(spec.categories):
        entry = catalog.find(category.domain, category.variant)
        if entry is not None:
            warnings += resolve_thresholds(merge_options(spec, index), entry, index).warnings
    return warnings


def _unknown_category(index: int, domain: str, variant: str, catalog: Catalog) -> FieldError:
    same_domain = [key for key in catalog.names() if key.startswith(f"{domain}/")]
    known = ", ".join(same_domain or catalog.names())
    return FieldError(
        ("spec", "categories", index),
        "unknown-category",
        f'no catalog entry "{domain}/{variant}"; known: {known}',
    )


def _resolve_category(
    spec: CertificationSpec, index: int, entry: CatalogEntry, gang: GangScheduling | None
) -> tuple[ResolvedCategory | None, list[FieldError]]:
    effective = merge_options(spec, index)
    options = effective.options
    labels = merge_workload_labels(catalog_labels=entry.labels, spec=spec, index=index, gang=gang)
    resources, resource_errors = _resolve_resources(effective, entry)
    thresholds = resolve_thresholds(effective, entry, index)
    checkpoint, checkpoint_errors = _resolve_checkpoint(effective, entry)
    errors = [
        *labels.errors,
        *resource_errors,
        *thresholds.errors,
        *_placement_errors(effective, entry, index),
        *checkpoint_errors,
    ]
    if errors:
        return None, errors
    category = spec.categories[index]
    return (
        ResolvedCategory(
            index=index,
            domain=category.domain,
            variant=category.variant,
            entry=entry,
            options=options,
            target=spec.target,
            workload_labels=labels.labels,
            gang=ResolvedGang(**vars(gang)) if gang else None,
            resources=resources,
            image=options.image,
            image_pull_secrets=[secret.name for secret in options.image_pull_secrets or []],
            source_repo=options.source_repo,
            thresholds=thresholds.thresholds,
            timeout_per_job=options.timeout_per_job or entry.defaults.timeout_per_job,
            measurement_timeout=options.measurement_timeout or DEFAULT_MEASUREMENT_TIMEOUT,
            enable_mnnvl=options.enable_mnnvl,
            checkpoint=checkpoint,
        ),
        [],
    )


def _resolve_resources(
    effective: EffectiveOptions, entry: CatalogEntry
) -> tuple[ResolvedResources | None, list[FieldError]]:
    """Training entries only: each of the four values falls back independently, then request <= limit."""
    if not entry.training:
        return None, []
    given = effective.options.resources
    limits, requests = dict(DEFAULT_LIMITS), dict(DEFAULT_REQUESTS)
    explicit = []
    for side, values in (("limits", limits), ("requests", requests)):
        chosen = getattr(given, side) if given else None
        for name in ("cpu", "memory"):
            value = getattr(chosen, name) if chosen else None
            if value is not None:
                values[name] = str(value)
                explicit.append(f"{side}.{name}")
    errors = []
    for name in ("cpu", "memory"):
        request, limit = parse_quantity(requests[name]), parse_quantity(limits[name])
        if request is not None and limit is not None and request > limit:
            errors.append(
                FieldError(
                    (*effective.origin("resources"), "requests", name),
                    "rule",
                    f"requests.{name} must not exceed limits.{name} "
                    f"({requests[name]} > {limits[name]} once defaults are applied)",
                )
            )
    return ResolvedResources(limits=limits, requests=requests, explicit=tuple(explicit) or None), errors


def _resolve_checkpoint(
    effective: EffectiveOptions, entry: CatalogEntry
) -> tuple[ResolvedCheckpoint | None, list[FieldError]]:
    """The checkpoint settings of a training category that enables checkpointing, else None.

    A spec-level `enableCheckpoint: true` applies to the training categories only (as every training option
    does); set on a category that does not train, it would be accepted and ignored, so it is refused there."""
    options = effective.options
    if not options.enable_checkpoint:
        return None, []
    if not entry.training:
        origin = effective.origin("enable_checkpoint")
        if origin[:2] != ("spec", "categories"):
            return None, []
        message = f"{entry.key}: enableCheckpoint applies to training entries only; this one does not train"
        return None, [FieldError(origin, "unsupported", message)]
    restarts = options.max_restarts if options.max_restarts is not None else entry.defaults.max_restarts
    return (
        ResolvedCheckpoint(
            storage_size=options.storage_size or DEFAULT_CHECKPOINT_STORAGE_SIZE,
            storage_class_name=options.storage_class_name,
            max_restarts=restarts or 0,
        ),
        [],
    )


def supports_diagnose(entry: CatalogEntry) -> bool:
    """Adaptive fault isolation screens multi-node collectives: communication entries that are not per-node."""
    return entry.domain == DIAGNOSE_DOMAIN and entry.grouping != "per-node"


def _placement_errors(effective: EffectiveOptions, entry: CatalogEntry, index: int) -> list[FieldError]:
    """Grouping choices that can be refused before any node is looked at (the plan step would refuse them
    too, hours later, after the categories before it ran).

    A missing nodesPerJob under `placement: Unpinned` is reported per category, at the category and naming
    it, as the reference does: a global placement is fine for a category that sets its own nodesPerJob, so
    the category is what needs fixing, not the placement."""
    options, errors = effective.options, []
    if options.test_scale == "diagnose" and not supports_diagnose(entry):
        errors.append(
            FieldError(
                effective.origin("test_scale"),
                "unsupported",
                f"{entry.key}: testScale diagnose (adaptive fault isolation) needs a multi-node communication "
                "entry; this one tests nodes one by one or is not a collective",
            )
        )
    if options.placement == "Unpinned":
        if options.nodes_per_job is None:
            errors.append(
                FieldError(
                    ("spec", "categories", index),
                    "required",
                    f"{entry.key}: placement Unpinned requires an explicit nodesPerJob (the scheduler picks "
                    "exactly that many target nodes); set it in this category's options or at spec.nodesPerJob",
                )
            )
        grouped = (
            f"{entry.key}, which runs one node per group"
            if entry.grouping == "per-node"
            else f"testScale {options.test_scale}"
            if options.test_scale in ("intra-node", "intra-rack", "diagnose")
            else None
        )
        if grouped:
            errors.append(
                FieldError(
                    effective.origin("placement"), "rule", f"placement Unpinned cannot be combined with {grouped}"
                )
            )
    return errors
