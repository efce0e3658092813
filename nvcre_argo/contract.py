"""What the compiled Argo Workflows and the in-workflow steps (`nvcre-argo step ...`) agree on.

One module for the names both sides use: template and parameter names, the environment the step containers
read, and the files their outputs are collected from. Changing a value here changes both sides at once.
"""

from __future__ import annotations

from nvcre_argo import __version__
from nvcre_argo.names import dns_label

DEFAULT_STEP_IMAGE = f"nvcre-argo:{__version__}"
# The step pods of the category Workflows (read nodes, run TrainJobs, read pods and logs, write results).
WORKFLOW_SERVICE_ACCOUNT = "nvcre-argo-workflow"
# The certification (parent) Workflow's pods: they create, follow and stop the category Workflows, and
# nothing else, so the identity that may create Workflows never also reads nodes or runs TrainJobs.
CERTIFICATION_SERVICE_ACCOUNT = "nvcre-argo-certification"
STEP_USER_ID = 65532

# The category WorkflowTemplate (one per catalog entry) and its parameters.
TEMPLATE_PREFIX = "nvcre"
PARAM_CATEGORY = "category"
PARAM_CERTIFICATION = "certification"

# Templates inside the category WorkflowTemplate.
TEMPLATE_CATEGORY = "category"
TEMPLATE_PLAN = "plan"
TEMPLATE_RUN_GROUP = "run-group"
TEMPLATE_RECORD = "record"
TEMPLATE_CLEANUP = "cleanup"
# Both Workflows' exit handler: a steps template whose one step (cleanup, stop-categories) runs unless the
# Workflow succeeded, when there is nothing left for it to stop.
TEMPLATE_ON_EXIT = "on-exit"
UNLESS_SUCCEEDED = "{{workflow.status}} != Succeeded"
# A container's exit code when SIGTERM ended it (128 + 15): how the kubelet stops the containers of a pod being
# deleted or evicted. A step exits with it on SIGTERM, and the steps' retry strategy retries it like an `Error`;
# a workload rank that ended with it was stopped, it did not fail (`steps.workload`).
EXIT_TERMINATED = 143
# `testScale: diagnose` (communication entries): plan -> rounds -> record, where `rounds` is
# plan-round -> run-group x N -> rounds again (Argo recursion) until plan-round finds nothing left to test.
TEMPLATE_DIAGNOSE = "diagnose"
TEMPLATE_ROUNDS = "rounds"
# The step of a category Workflow that runs confirmation rounds after its groups (`steps.confirming`).
TEMPLATE_CONFIRM = "confirm"
TEMPLATE_PLAN_ROUND = "plan-round"
PARAM_ROUND = "round"
# The same entrypoints with one shared runner (`steps.shared_runner`): a `run-groups` pod runs every group of
# the fan-out, and each group is a `group` suspend node (no pod) that the runner completes.
SHARED_RUNNER_SUFFIX = "-shared"
TEMPLATE_RUN_GROUPS = "run-groups"
TEMPLATE_GROUP = "group"
PARAM_GROUP = "group"
PARAM_GROUPS = "groups"

# The key of the category Workflow's concurrency ConfigMap (`names.concurrency_configmap`) that the run-group
# template's semaphore reads its limit from: maxConcurrent, written by the plan step.
CONCURRENCY_KEY = "max-concurrent"

# Templates inside the certification (parent) Workflow.
TEMPLATE_CERTIFICATION = "certification"
TEMPLATE_VERDICT = "verdict"
TEMPLATE_STOP_CATEGORIES = "stop-categories"
# The certification WorkflowTemplate (installed by `nvcre-argo install`) that certification Workflows compiled
# with `--template-ref` reference, as Argo's `templateReferencing: Strict` requires: its parameters are the
# certification's name, its category Workflows (a JSON object, step name -> manifest) and the step names in
# spec order (a JSON list, the fan-out's items).
CERTIFICATION_TEMPLATE = f"{TEMPLATE_PREFIX}-certification"
PARAM_CATEGORY_WORKFLOWS = "categories"
PARAM_CATEGORY_STEPS = "steps"
PARAM_STEP = "step"


def shared_runner_entrypoint(entrypoint: str) -> str:
    """The entrypoint that runs the same steps with one shared runner: `category-shared`, `diagnose-shared`."""
    return f"{entrypoint}{SHARED_RUNNER_SUFFIX}"


def category_step_template(index: int) -> str:
    """The certification Workflow's template for its category `index` (`category-<index>`): the renderer names
    its step so, and the watcher finds the step by it."""
    return f"category-{index}"


def category_template_name(domain: str, variant: str) -> str:
    """The WorkflowTemplate that runs one catalog entry: `nvcre-<domain>-<variant>`."""
    return dns_label(f"{TEMPLATE_PREFIX}-{domain}-{variant}")


# Outputs: small values only (names and counts); node lists and logs go to ConfigMaps.
OUTPUT_GROUPS = "groups"
# plan: whether any group could need confirmation ("true": a pinned group of two or more nodes).
OUTPUT_CONFIRMABLE = "confirmable"
OUTPUT_FAILED_NODES_REF = "failed-nodes-ref"
OUTPUT_SUCCEEDED_NODES_REF = "succeeded-nodes-ref"
OUTPUT_DIR = "/tmp/nvcre"  # noqa: S108 - inside the step container, an emptyDir
GROUPS_FILE = f"{OUTPUT_DIR}/groups.json"
CONFIRMABLE_FILE = f"{OUTPUT_DIR}/confirmable"
FAILED_NODES_REF_FILE = f"{OUTPUT_DIR}/failed-nodes-ref"
SUCCEEDED_NODES_REF_FILE = f"{OUTPUT_DIR}/succeeded-nodes-ref"
# plan-round: whether the isolation is done, the number of the round after this one, and one line of
# progress (shown in the Argo UI, and by the watcher as the category's message while it runs).
OUTPUT_DONE = "done"
OUTPUT_NEXT_ROUND = "next-round"
OUTPUT_PROGRESS = "progress"
DONE_FILE = f"{OUTPUT_DIR}/done"
NEXT_ROUND_FILE = f"{OUTPUT_DIR}/next-round"
PROGRESS_FILE = f"{OUTPUT_DIR}/progress"
# A category step of the certification Workflow: its category Workflow, its verdict, how many nodes failed.
OUTPUT_CATEGORY_WORKFLOW = "workflow"
OUTPUT_VERDICT = "verdict"
OUTPUT_FAILED_NODE_COUNT = "failed-nodes"
CATEGORY_WORKFLOW_FILE = f"{OUTPUT_DIR}/workflow"
VERDICT_FILE = f"{OUTPUT_DIR}/verdict"
FAILED_NODE_COUNT_FILE = f"{OUTPUT_DIR}/failed-nodes"
# The step name a category step ran (read by the certification WorkflowTemplate's verdict).
OUTPUT_CATEGORY_STEP = "step"
CATEGORY_STEP_FILE = f"{OUTPUT_DIR}/step"
# The run-group step's outputs (shown per group in the Argo UI): what it measured, how many nodes it failed.
OUTPUT_MEASUREMENTS = "measurements"
MEASUREMENTS_FILE = f"{OUTPUT_DIR}/measurements"

# Environment of the step containers.
ENV_CATEGORY = "NVCRE_CATEGORY"
ENV_CERTIFICATION = "NVCRE_CERTIFICATION"
ENV_WORKFLOW_NAME = "NVCRE_WORKFLOW_NAME"
ENV_WORKFLOW_UID = "NVCRE_WORKFLOW_UID"
ENV_NAMESPACE = "NVCRE_NAMESPACE"
ENV_GROUP = "NVCRE_GROUP"
ENV_GROUPS = "NVCRE_GROUPS"
ENV_ITERATION = "NVCRE_ITERATION"
ENV_ROUND = "NVCRE_ROUND"
ENV_STATUSES = "NVCRE_CATEGORY_STATUSES"
# A category step of the certification Workflow: the category Workflow to start (JSON) and its key.
ENV_CATEGORY_WORKFLOW = "NVCRE_CATEGORY_WORKFLOW"
ENV_CATEGORY_KEY = "NVCRE_CATEGORY_KEY"
# ... or, in the certification WorkflowTemplate, every category's Workflow and the one this step starts.
ENV_CATEGORY_WORKFLOWS = "NVCRE_CATEGORY_WORKFLOWS"
ENV_CATEGORY_STEP = "NVCRE_CATEGORY_STEP"
# Its verdict step: the category steps expected (JSON list) and the outputs of those that succeeded (Argo's
# aggregate of a fan-out's outputs, a JSON list of objects).
ENV_CATEGORY_STEPS = "NVCRE_CATEGORY_STEPS"
ENV_CATEGORY_OUTPUTS = "NVCRE_CATEGORY_OUTPUTS"

# Where a step leaves its one-line failure summary (the container's terminationMessagePath default); the
# kubelet keeps at most 4 KiB of it.
TERMINATION_LOG = "/dev/termination-log"
TERMINATION_MESSAGE_LIMIT = 4096
