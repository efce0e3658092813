"""Adaptive fault isolation (`testScale: diagnose`, reference §7.6): which nodes to test together next, and
when to stop with a verdict.

Pure functions of (candidate nodes with their topology domain, every job result so far, settings), so the
`plan-round` step, tests and the benchmark reach the same rounds from the same history:

    model       Candidate, Group, JobResult, Round, Verdict, InfrastructureFault, Untested, Settings
    domains     candidates from topology labels, or ceil(sqrt(N)) chunks without them
    knowledge   what the results prove: cleared nodes, verified domain links, faulty nodes and links
    planner     plan_isolation_round: our strategy (screening, link search and splitting share rounds)
    links       the link search: tests of open domain pairs with cleared nodes (re-screens, then blocks)
    verdict     what the results prove once no test is left: faulty, healthy, link faults, untested
    baseline    plan_baseline_round: the reference's published stage-by-stage strategy, for comparison
"""

from nvcre_argo.plan.isolation.baseline import plan_baseline_round
from nvcre_argo.plan.isolation.domains import assign_domains
from nvcre_argo.plan.isolation.model import (
    Candidate,
    Group,
    InfrastructureFault,
    JobResult,
    Outcome,
    Round,
    Settings,
    Stage,
    Untested,
    Verdict,
)
from nvcre_argo.plan.isolation.planner import plan_isolation_round

__all__ = [
    "Candidate",
    "Group",
    "InfrastructureFault",
    "JobResult",
    "Outcome",
    "Round",
    "Settings",
    "Stage",
    "Untested",
    "Verdict",
    "assign_domains",
    "plan_baseline_round",
    "plan_isolation_round",
]
