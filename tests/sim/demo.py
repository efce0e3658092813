"""``make demo``: the whole product on a simulated GPU cluster, the way a newcomer sees it without a GPU.

Starts the simulated cluster (eight fake H100 nodes, real Argo, Trainer, JobSet and Kubernetes controllers),
installs nvcre-argo with its watcher in ``--submit`` mode, applies the example Certification as
``kubectl apply`` would, waits for the verdict and prints the Argo Workflow tree and ``nvcre-argo report``.
When ``make testbin`` has built Argo's server with its UI, it serves the namespace on 127.0.0.1 and prints the
URL first, so the run can be watched in a browser as it happens.
Optional: ``--fault-plan FILE`` injects faults (format in tests/sim/faults.py), ``--keep`` leaves the
cluster's logs behind, ``--hold`` keeps the cluster and the UI up after the verdict until Ctrl-C.
Exit code: 0 when the Certification PASSED.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

from kubernetes import client as k8s

from tests.sim import scenario
from tests.sim.argoserver import ArgoServer, argo_ui_built
from tests.sim.cluster import SimCluster, gpu_nodes

NAMESPACE = "nvcre"
RUN_TIMEOUT_S = 900
# A newcomer's browser should open on the run, not on Argo's first-visit, feedback and new-version pop-ups.
QUIET_UI = {"FIRST_TIME_USER_MODAL": "false", "FEEDBACK_MODAL": "false", "NEW_VERSION_MODAL": "false"}


def _serve_ui(sim: SimCluster, stack: contextlib.ExitStack) -> None:
    """Start Argo's server with its UI for the demo's namespace and print where to look (when it is built)."""
    if not argo_ui_built():
        print("  (Argo's UI is not built: `make testbin` builds it, and the demo then prints its URL)")
        return
    server = stack.enter_context(
        ArgoServer(kubeconfig=sim.kubeconfig, namespace=NAMESPACE, workdir=sim.workdir / "argo-server", env=QUIET_UI)
    )
    print(f"\n  Watch it in Argo's UI: {server.url}/workflows/{NAMESPACE}\n", flush=True)


def _hold() -> None:
    print("\n  holding the cluster and the UI up: Ctrl-C to stop", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        while True:
            time.sleep(3600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=8, help="number of fake GPU nodes (default 8)")
    parser.add_argument("--fault-plan", type=Path, help="a fault plan YAML to inject (default: all healthy)")
    parser.add_argument("--keep", action="store_true", help="keep the cluster's work directory and logs")
    parser.add_argument("--hold", action="store_true", help="keep the cluster and Argo's UI up until Ctrl-C")
    args = parser.parse_args(argv)

    began = time.monotonic()
    with (
        SimCluster(nodes=gpu_nodes(args.nodes), keep_workdir=args.keep) as sim,
        sim.api_client() as api,
        contextlib.ExitStack() as stack,
    ):
        kubeconfig = sim.kubeconfig
        print(f"\n$ kubectl create namespace {NAMESPACE} && nvcre-argo install --watch-namespace {NAMESPACE}")
        k8s.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
        scenario.install(kubeconfig, NAMESPACE, submit=True)
        _serve_ui(sim, stack)
        if args.fault_plan:
            scenario.write_fault_plan(api, NAMESPACE, args.fault_plan.read_text(encoding="utf-8"))
        print(f"$ kubectl apply -f {scenario.EXAMPLE.relative_to(scenario.REPO_ROOT)}")
        certification = scenario.example_certification(NAMESPACE)
        scenario.apply_certification(api, certification)
        name = certification["metadata"]["name"]
        print("  waiting for the watcher to submit the Workflows and for Argo to run them ...", flush=True)
        found = scenario.wait_certification_result(api, NAMESPACE, name, timeout_s=RUN_TIMEOUT_S)
        for parent in scenario.names(scenario.workflows(api, NAMESPACE, "nvcre.nvidia.com/role=certification")):
            scenario.wait_workflow_done(api, NAMESPACE, parent, timeout_s=RUN_TIMEOUT_S)  # its verdict step
        print(f"\n$ argo list -n {NAMESPACE}   (the Workflow tree)\n{scenario.workflow_tree(api, NAMESPACE)}")
        print(f"\n$ nvcre-argo report {name} -n {NAMESPACE}")
        report = scenario.run_cli("report", name, "-n", NAMESPACE, kubeconfig=kubeconfig, check=False)
        print(report.stdout + report.stderr)
        print(f"demo finished in {time.monotonic() - began:.0f} s; result {found['status']['result']}")
        if args.hold:
            _hold()
        return 0 if found["status"]["result"] == "PASSED" else 1


if __name__ == "__main__":
    sys.exit(main())
