"""What the shared runner's groups read while their workloads run, from three mirrors (`kube.mirror`) shared
by all of them instead of a GET, a LIST and a watch per group per poll.

- the category's TrainJobs (its certification's and category's labels): a group's poll reads its TrainJob
  here, and its pause between polls ends on the mirror's news of it;
- the namespace's JobSet pods, indexed by their JobSet's name (the TrainJob's): a group's poll reads its
  pods here, and the last states of those already deleted (a crashed rank's pod goes with its failed Job,
  possibly before the group's next poll);
- the category's Nodes (those of its groups, through the target's label selector): each group's health
  check subscribes to its own nodes here instead of watching them itself.

A TrainJob the mirror has not seen yet (its group just created it) is read from the API server, so it never
reads as deleted. The mirrors lag the API server a little, and independently of each other, so the run
step reads a workload's final state (Complete, Failed, gone) from the API server before judging it
(`steps.following`): a crashed rank's pod must be seen with the TrainJob's failure, or the whole group would
be blamed for one node's crash. A groupmate's pod that JobSet deleted because of that crash is seen too, its
container stopped by the kubelet; `steps.workload.first_failures` does not take it for the culprit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.follow import Selection
from nvcre_argo.kube.mirror import Mirror
from nvcre_argo.kube.resources import NODES, PODS, TRAINJOBS, Resource
from nvcre_argo.names import (
    JOBSET_NAME_LABEL,
    LABEL_CATEGORY_INDEX,
    LABEL_CERTIFICATION,
    LABEL_MANAGED_BY,
    MANAGED_BY,
)
from nvcre_argo.plan.selection import target_label_selector
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.health import monitor_enabled, node_name


@dataclass(frozen=True)
class CategoryMirror:
    """The shared reads of one category's runner, open for the runner's life (`open_category_mirror`)."""

    namespace: str
    trainjobs: Mirror
    pods: Mirror
    nodes: Mirror | None  # None: the category's health monitor is off, nobody reads Nodes

    def trainjob(self, kube: KubeClient, name: str) -> dict[str, Any] | None:
        """The TrainJob as last seen, or as the API server has it when the mirror has not seen it yet."""
        held = self.trainjobs.get(name)
        return held if held is not None else kube.get(TRAINJOBS, name, self.namespace)

    def workload_pods(self, name: str) -> list[dict[str, Any]]:
        """The pods of TrainJob `name` (its JobSet's), as last seen."""
        return self.pods.indexed(name)

    def departed_pods(self, name: str) -> list[dict[str, Any]]:
        """The last states of TrainJob `name`'s pods deleted since the runner started."""
        return self.pods.departed(name)

    def until_changed(self, kube: KubeClient, resource: Resource, seen: Mapping[str, Any], timeout: float) -> bool:
        """A run step's pause between two polls of a TrainJob (`RunSettings.until_changed`): it ends on the
        mirror's news of it, with no request of its own."""
        del kube  # the signature of `kube.change.wait_for_change`, which this replaces
        if resource != TRAINJOBS:
            raise ValueError(f"the category mirror follows TrainJobs, not {resource.kind}")
        metadata = seen.get("metadata") or {}
        name, version = str(metadata.get("name", "")), str(metadata.get("resourceVersion", ""))
        return self.trainjobs.wait_for_change(name, version, timeout)


@contextlib.contextmanager
def open_category_mirror(
    kube: KubeClient, context: StepContext, node_names: Collection[str]
) -> Iterator[CategoryMirror]:
    """List and watch the category's TrainJobs, its namespace's JobSet pods and (when the health monitor is
    on) its groups' Nodes, `node_names`, until the block ends."""
    trainjob_selector = ",".join(
        (
            f"{LABEL_MANAGED_BY}={MANAGED_BY}",
            f"{LABEL_CERTIFICATION}={context.certification}",
            f"{LABEL_CATEGORY_INDEX}={context.category.index}",
        )
    )
    wanted = frozenset(node_names)
    with contextlib.ExitStack() as stack:
        trainjobs = stack.enter_context(
            Mirror(kube, TRAINJOBS, context.namespace, Selection(label_selector=trainjob_selector), what="TrainJob")
        )
        pods = stack.enter_context(
            Mirror(
                kube,
                PODS,
                context.namespace,
                Selection(label_selector=JOBSET_NAME_LABEL),
                what="Pod",
                index_label=JOBSET_NAME_LABEL,
            )
        )
        nodes = None
        if monitor_enabled(context.category.target):
            nodes = stack.enter_context(
                Mirror(
                    kube,
                    NODES,
                    None,
                    Selection(label_selector=target_label_selector(context.category.target)),
                    what="Node",
                    keep=lambda node: node_name(node) in wanted,
                )
            )
        yield CategoryMirror(context.namespace, trainjobs, pods, nodes)
