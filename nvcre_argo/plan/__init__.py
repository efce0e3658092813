"""Plan one category's run on the cluster's nodes: which nodes take part, which are left out and why, and how
the rest are split into node groups (one TrainJob each).

Pure functions over Kubernetes Node objects as the API returns them (plain dicts), so the plan step, the
`nvcre-argo plan` preview and the tests all reach the same plan from the same node list:

    selection   target matching, cordoned nodes, GPU-architecture vote, GPU capacity
    grouping    node groups: per node, per rack (NVLink clique), chunks of nodesPerJob, training sizes
    model       Exclusion, NodeGroup, Plan (JSON round-trip, Argo withParam items: group names), PlanError
    planner     plan_category: the above composed in the reference's order
    storage     the plan's ConfigMap (compressed) and reading it back
    nodelist    a saved node list (`kubectl get nodes -o yaml`) read for an offline preview
    preview     `nvcre-argo plan`: every category's plan, TrainJobs and GPU-hours; preview_text renders it
"""
