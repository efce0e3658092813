"""Every name and label key the product writes, from one module.

Names must be deterministic (retries and restarts find what they created), valid for their kind
(DNS-1123 labels, RFC 1035 for TrainJobs, 63 characters) and short enough for what Kubernetes derives from
them: a TrainJob's pods are `<trainjob>-<rjob>-<i>-<j>-<5 chars>`, and JobSet rejects pod names over 63, so
TrainJob names stay within 40. When a name must be shortened, a hash of the full name keeps it unique.
"""

from __future__ import annotations

import hashlib
import re

GROUP = "nvcre.nvidia.com"
LABEL_CERTIFICATION = f"{GROUP}/certification"
LABEL_CATEGORY_INDEX = f"{GROUP}/category-index"
LABEL_DOMAIN = f"{GROUP}/domain"
LABEL_VARIANT = f"{GROUP}/variant"
LABEL_GROUP = f"{GROUP}/group"
LABEL_ROLE = f"{GROUP}/role"
LABEL_WORKFLOW = f"{GROUP}/workflow"
LABEL_RECORD = f"{GROUP}/record"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
# JobSet's label on its pods; a TrainJob's JobSet bears the TrainJob's name.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
MANAGED_BY = "nvcre-argo"
ROLE_PARENT = "certification"
ROLE_CATEGORY = "category"
PATCH_MANAGER = f"{GROUP}/nvcre-argo"

TRAINJOB_NAME_LIMIT = 40
DNS_LABEL_LIMIT = 63
_INVALID = re.compile(r"[^a-z0-9-]+")


def short_hash(text: str, length: int = 8) -> str:
    """A stable hex digest (never Python's salted `hash()`)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def dns_label(text: str, limit: int = DNS_LABEL_LIMIT) -> str:
    """`text` as a DNS-1123 label of at most `limit` characters; shortened names end in a hash of the original."""
    cleaned = _INVALID.sub("-", text.lower()).strip("-") or "x"
    if len(cleaned) <= limit:
        return cleaned
    suffix = short_hash(text)
    return f"{cleaned[: limit - len(suffix) - 1].rstrip('-')}-{suffix}"


def category_step_name(domain: str, variant: str) -> str:
    """The parent Workflow's step for a category: its variant (`nccl-all-reduce`), which names the test and is
    short enough for Argo's graph, which cuts labels at 28 characters. The domain is in the step's Workflow."""
    del domain
    return dns_label(variant)


# Argo appends 5 random characters to a generateName; a category Workflow adds `-<index>` (up to 3 more).
_PARENT_PREFIX_LIMIT = DNS_LABEL_LIMIT - 5 - 3 - 1


def certification_workflow_prefix(certification: str) -> str:
    """generateName of the certification Workflow, short enough for its category Workflows' names."""
    return dns_label(certification, _PARENT_PREFIX_LIMIT) + "-"


def submitted_workflow_name(certification: str, uid: str) -> str:
    """The certification Workflow the watcher creates: one name per Certification object, so a restarted
    watcher finds it instead of creating another."""
    suffix = f"-{uid.replace('-', '')[:5]}"
    return dns_label(certification, _PARENT_PREFIX_LIMIT + 6 - len(suffix)) + suffix


def category_step_names(categories: list[tuple[str, str]]) -> list[str]:
    """Step names equal to the variant, so the Argo graph reads like the spec; repeats get `-2`, `-3`."""
    seen: dict[str, int] = {}
    names = []
    for domain, variant in categories:
        base = category_step_name(domain, variant)
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return names


def trainjob_name(workflow_name: str, group: str, iteration: int = 0, attempt: int = 1, restart: int = 0) -> str:
    """Deterministic per (category Workflow, group, iteration, attempt, checkpoint restart): a re-run finds the
    TrainJob it made; a re-test (`argo retry` of a finished group) is a new attempt with a new TrainJob; a
    checkpoint restart of a failed workload is `-r1`, `-r2`, ..."""
    suffix = (
        f"-{group}"
        + (f"-i{iteration}" if iteration else "")
        + (f"-a{attempt}" if attempt > 1 else "")
        + (f"-r{restart}" if restart else "")
    )
    stem = dns_label(workflow_name, TRAINJOB_NAME_LIMIT - len(suffix))
    name = f"{stem}{suffix}"
    return name if name[0].isalpha() else f"t{dns_label(workflow_name, TRAINJOB_NAME_LIMIT - len(suffix) - 1)}{suffix}"


def runtime_name(workflow_name: str) -> str:
    return dns_label(f"{workflow_name}-runtime")


# Where a checkpointing training pod mounts the category's checkpoint PVC; each test of a group (its first
# TrainJob's name) has its own directory there, which that test's checkpoint restarts resume from.
CHECKPOINT_MOUNT = "/mnt/checkpoints"


def checkpoint_claim_name(workflow_name: str) -> str:
    """The category Workflow's checkpoint PVC: one per run, so two runs of a Certification never share (and
    never resume from) each other's checkpoints, which the reference's fixed `<variant>-pvc` would."""
    return dns_label(f"{workflow_name}-checkpoints")


def checkpoint_dir(first_trainjob: str) -> str:
    """The checkpoint directory of one test of a group, named by the test's first TrainJob."""
    return f"{CHECKPOINT_MOUNT}/{first_trainjob}"


CONCURRENCY_SUFFIX = "-concurrency"


def workflow_id(workflow_uid: str) -> str:
    """The reference's ConfigMap suffix: the first 8 characters of the Workflow's UID."""
    return workflow_uid.replace("-", "")[:8]


def failed_nodes_configmap(workflow_uid: str) -> str:
    return f"failed-nodes-{workflow_id(workflow_uid)}"


def succeeded_nodes_configmap(workflow_uid: str) -> str:
    return f"succeeded-nodes-{workflow_id(workflow_uid)}"


def group_nodes_configmap(workflow_uid: str) -> str:
    return f"group-nodes-{workflow_id(workflow_uid)}"


def concurrency_configmap(workflow_name: str) -> str:
    """The ConfigMap holding a category Workflow's group semaphore limit (`maxConcurrent`). Named after the
    Workflow's name, not its UID, because Argo can template a semaphore's ConfigMap name only with what it
    knows (`{{workflow.name}}`), never with a cut-down UID."""
    return f"{workflow_name}{CONCURRENCY_SUFFIX}"


def group_result_configmap(workflow_uid: str, group: str) -> str:
    """Where the run step of one group keeps its result until the record step gathers them."""
    return dns_label(f"group-result-{workflow_id(workflow_uid)}-{group}")
