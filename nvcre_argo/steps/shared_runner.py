"""One step pod runs all the groups of a fan-out (`nvcre-argo step run-groups`), so a category's orchestration
footprint does not grow with its groups: 1,024 per-node groups are one pod, not 1,024 waiting pods.

Each group is still a node of its own in the Argo UI: a `group` suspend node beside the runner. The runner
follows its Workflow's status; when Argo has run a group's node (it turns Running), the runner runs the group in
a thread of its own (`steps.group_step`, the same code as a group's own step pod) and, when it ends, completes
its node with its outcome (`steps.group_nodes`).

The runner, not an Argo semaphore, holds `maxConcurrent` here: it runs at most that many groups at once, in the
fan-out's order, and a group waiting for a slot says so in its node's message. Why not the semaphore that bounds
a pod per group: Argo's controller asks it for every one of a fan-out's nodes on every pass over the Workflow,
and reads the semaphore's limit from its ConfigMap each time (unless its `semaphoreLimitCacheSeconds` is set),
so at 256 groups it took three minutes to create the nodes, passes cut short by its 30-second operation limit.

The groups read their TrainJobs, pods and Nodes from mirrors the runner holds for the category
(`steps.category_mirror`, opened by the `run-groups` command): one list + watch of each kind, not a GET, a LIST
and a watch per group per poll, so the runner's requests to the API server do not grow with its groups while
they run (at 1,024 groups the per-group reads were about 190 requests a second).

Idempotent like the run step: an evicted runner is retried by Argo (`retryStrategy: OnError`), finds the
groups still running and follows the TrainJobs their runs created. Groups already completed are left alone.
The runner ends when every one of its groups has a final node, and fails when any group it ran failed, so
that `argo retry` runs it again together with the failed groups.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from nvcre_argo import contract
from nvcre_argo.kube.client import KubeClient
from nvcre_argo.kube.errors import ApiError
from nvcre_argo.kube.resources import WORKFLOWS
from nvcre_argo.steps.context import StepContext
from nvcre_argo.steps.group_nodes import Completion, GroupNode, group_nodes, node_patch
from nvcre_argo.steps.group_step import GroupStepOutcome

log = logging.getLogger(__name__)

POLL_SECONDS = 2.0
# What the API server answers when the patch's `test` finds the node no longer as read, or the object changed.
STALE_READ_STATUSES = frozenset({409, 422})

RunItem = Callable[[str, Callable[[str], None]], GroupStepOutcome]


@dataclass
class SharedRun:
    """What the runner did: each group it ran, with its outcome, and the groups it found completed by others."""

    outcomes: dict[str, GroupStepOutcome] = field(default_factory=dict)
    completed_elsewhere: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> list[str]:
        return sorted(item for item, outcome in self.outcomes.items() if not outcome.passed)

    def summary(self) -> str:
        """One line: how many groups ran and passed, and each failed group's failure."""
        ran, failed = len(self.outcomes), self.failed
        text = f"{ran - len(failed)}/{ran} group(s) passed"
        if failed:
            text += ": " + "; ".join(f"{item}: {self.outcomes[item].summary}" for item in failed)
        if self.completed_elsewhere:
            ended = ", ".join(f"{item} ({phase})" for item, phase in sorted(self.completed_elsewhere.items()))
            text += f"; completed outside this runner: {ended}"
        return text


def outputs_of(outcome: GroupStepOutcome) -> dict[str, str]:
    """The group node's supplied outputs, as a group's own step pod would publish them."""
    return {
        contract.OUTPUT_MEASUREMENTS: outcome.measurements,
        contract.OUTPUT_FAILED_NODE_COUNT: outcome.failed_node_count,
    }


def run_shared(
    kube: KubeClient,
    context: StepContext,
    items: Sequence[str],
    run_item: RunItem,
    *,
    limit: int | None = None,
    report: Callable[[str], None] = print,
    poll_seconds: float = POLL_SECONDS,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> SharedRun:
    """Run every group of `items` whose node Argo has run, at most `limit` at once (`maxConcurrent`; None or 0:
    all at once), complete its node, and return when all of them have a final node. `run_item(item, report)`
    runs one group (in a thread of its own)."""
    done: queue.Queue[tuple[str, GroupStepOutcome]] = queue.Queue()
    started: set[str] = set()
    ended: dict[str, GroupStepOutcome] = {}  # groups run to their end whose node was not yet read final
    result = SharedRun()
    while True:
        workflow = _workflow(kube, context)
        nodes = group_nodes(workflow, items)
        while not done.empty():
            item, outcome = done.get_nowait()
            ended[item] = outcome
        running = started - set(ended) - set(result.outcomes) - set(result.completed_elsewhere)
        for item in startable(items, nodes, started, free=limit - len(running) if limit else None):
            started.add(item)
            running.add(item)
            _start(item, run_item, report, done)
        _settle(
            kube, context, workflow, nodes, ended, running=running, limit=limit, result=result, report=report, now=now
        )
        unfinished = [item for item in items if item not in nodes or not nodes[item].finished]
        if not unfinished and not running and not ended:
            return result
        try:
            item, outcome = done.get(timeout=poll_seconds)
            ended[item] = outcome
        except queue.Empty:
            pass


def startable(
    items: Sequence[str], nodes: Mapping[str, GroupNode], started: set[str], *, free: int | None
) -> list[str]:
    """The groups to start now, in the fan-out's order: those whose node runs and that have not started, at
    most `free` of them (None: no limit). In order, so that a retried runner picks up the groups its
    predecessor was running before any it had not started (the groups start in order, so the ones still
    running come first among those not finished)."""
    ready = [item for item in items if item not in started and item in nodes and nodes[item].running]
    return ready if free is None else ready[: max(0, free)]


def waiting_message(limit: int) -> str:
    """What the node of a group waiting for a slot shows (fixed, so that it is written once)."""
    return f"waiting for a slot: at most {limit} group(s) run at once (maxConcurrent)"


def _workflow(kube: KubeClient, context: StepContext) -> dict[str, object]:
    workflow = kube.get(WORKFLOWS, context.workflow_name, context.namespace)
    if workflow is None:
        raise LookupError(f"Workflow {context.namespace}/{context.workflow_name} no longer exists")
    return workflow


def _start(
    item: str,
    run_item: RunItem,
    report: Callable[[str], None],
    done: queue.Queue[tuple[str, GroupStepOutcome]],
) -> None:
    """Run one group in a thread; whatever happens, its outcome reaches the queue (an unexpected error is the
    group's failure, as it would be its step pod's)."""

    def say(line: str) -> None:
        report(f"[{item}] {line}")

    def body() -> None:
        started = time.monotonic()
        try:
            outcome = run_item(item, say)
        except Exception as error:  # the group's failure, never the runner's: the others run on
            log.exception("group %s", item)
            outcome = GroupStepOutcome(False, f"the group's run failed: {type(error).__name__}: {error}", "", "")
        say(f"{'passed' if outcome.passed else 'FAILED'} after {time.monotonic() - started:.0f}s")
        done.put((item, outcome))

    say("started")
    threading.Thread(target=body, name=f"group-{item}", daemon=True).start()


def _settle(
    kube: KubeClient,
    context: StepContext,
    workflow: Mapping[str, Any],
    nodes: Mapping[str, GroupNode],
    ended: dict[str, GroupStepOutcome],
    *,
    running: set[str],
    limit: int | None,
    result: SharedRun,
    report: Callable[[str], None],
    now: Callable[[], datetime],
) -> None:
    """Bring the group nodes up to date, all in one request: complete the nodes of the groups that ended (at a
    wave's end hundreds of groups end within seconds; a request each would make the last wait for all the
    others), and write or clear the message of each group waiting for a slot. Forget the ended groups whose node
    reads final. A group stays in `ended` until its node reads final: should the patch be refused (the Workflow
    changed since it was read) or an update of Argo's carry the node back to Running, the next pass writes it
    again."""
    for item in list(ended):
        node = nodes.get(item)
        if node is None or not node.finished:
            continue
        if item not in result.outcomes:
            result.completed_elsewhere[item] = node.phase
            report(f"[{item}] its node is {node.phase}, not Running: left as it is (its result is recorded)")
        del ended[item]
    completing = {item for item in ended if item in nodes and nodes[item].running}
    changes = node_changes(nodes, {item: ended[item] for item in completing}, running=running, limit=limit, at=now())
    if not changes:
        return
    try:
        kube.json_patch(WORKFLOWS, context.workflow_name, node_patch(workflow, changes), context.namespace)
    except ApiError as error:
        if error.status not in STALE_READ_STATUSES:
            raise
        log.info("%d group node(s) changed before they were written (%s); reading them again", len(changes), error)
        return
    for item in completing:
        result.outcomes[item] = ended[item]


def node_changes(
    nodes: Mapping[str, GroupNode],
    completing: Mapping[str, GroupStepOutcome],
    *,
    running: set[str],
    limit: int | None,
    at: datetime,
) -> dict[str, dict[str, Any]]:
    """What to write to the group nodes Argo shows Running, by node id (a field given as None is removed):
    the outcome of each group in `completing` (a waiting message it had is cleared with it), no message on a
    group that runs, and the waiting message on a group that waits for a slot (only when `limit` bounds the
    groups; written once, since it never changes). Nodes that need nothing are left out."""
    finished_at = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    changes: dict[str, dict[str, Any]] = {}
    for item, node in nodes.items():
        if not node.running:
            continue
        if item in completing:
            fields: dict[str, Any] = _completion(completing[item], finished_at).fields()
            if node.message and "message" not in fields:
                fields["message"] = None  # a waiting message, outlived
            changes[node.node_id] = fields
        elif item in running:
            if node.message:
                changes[node.node_id] = {"message": None}
        elif limit and node.message != waiting_message(limit):
            changes[node.node_id] = {"message": waiting_message(limit)}
    return changes


def _completion(outcome: GroupStepOutcome, finished_at: str) -> Completion:
    """What a group's node shows of its outcome, as a group's own step pod would publish it."""
    return Completion(outcome.passed, outcome.summary, outputs_of(outcome), finished_at)
