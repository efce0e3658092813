"""Split a category's eligible nodes into node groups, one TrainJob each (reference §7.3, §7.5).

In order of precedence:
- `placement: Unpinned`: exactly one group of `nodesPerJob` nodes (required) that the scheduler picks from
  the target, so the group lists no nodes (`pinned=False`); combining it with per-node entries or a
  per-node/per-rack/diagnose test scale is an error.
- `per-node` catalog entries, and `testScale: intra-node`: one node per group (`nodesPerJob` is ignored).
- `testScale: intra-rack`: one group per NVLink domain (`nvidia.com/gpu.clique` value) at its natural size;
  a node without the label forms a group of its own, since nothing says which rack it shares.
- `nodesPerJob` set: chunks of that size (clamped to the node count) covering every node: ceil(M/N) groups.
  A short last group borrows nodes from one earlier group, its host, to reach N and is marked `overflow`
  (named `gK-overflow`); the host's step runs it right after the host's own job. When nodes carry
  `nvidia.com/gpu.clique`, chunks are packed into as few domains as possible: whole chunks inside each
  domain first, then the domains' remainders (largest first) share the rest.
- training entries without `nodesPerJob`: the largest node count <= M whose GPUs reach `minGPUs` and divide
  by tensor x pipeline parallelism, the rest chunked the same way; a training group that cannot reach
  `minGPUs` is an error either way, since Megatron-LM would only fail at start-up.
- otherwise (`full-scale`, the default): one group of every node.

`testScale` applies to non-training entries only (the reference: "communication entries only"); `diagnose`
(adaptive fault isolation) has no fixed groups: its rounds are planned at run time (`isolation_of`).
Group names are `g0`, `g1`, ... (DNS-label safe); nodes inside a group are sorted by name.
"""

from __future__ import annotations

from collections.abc import Sequence

from nvcre_argo.plan.isolation import assign_domains
from nvcre_argo.plan.model import Isolation, NodeGroup, PlanError
from nvcre_argo.plan.nodes import Node, clique_of, node_name
from nvcre_argo.resolve.category import ResolvedCategory
from nvcre_argo.resolve.values import GpuValues

OVERFLOW_SUFFIX = "-overflow"
DEFAULT_MIN_GROUP_SIZE = 2


def group_nodes(nodes: Sequence[Node], category: ResolvedCategory, gpu: GpuValues) -> tuple[NodeGroup, ...]:
    """The node groups of one category over its eligible nodes (at least one, sorted by name)."""
    if not nodes:
        raise PlanError("no eligible node to group")
    options, entry = category.options, category.entry
    scale = None if entry.training else options.test_scale
    names = [node_name(node) for node in nodes]
    domains = {node_name(node): clique_of(node) for node in nodes}
    if options.placement == "Unpinned":
        return (_unpinned_group(len(names), category, gpu, scale),)
    if entry.grouping == "per-node" or scale == "intra-node":
        return tuple(NodeGroup(f"g{index}", (name,), domain=domains[name]) for index, name in enumerate(names))
    if scale == "intra-rack":
        return group_by_domain(names, domains)
    if scale == "diagnose":
        raise PlanError("testScale diagnose plans its groups round by round (see isolation_of), not here")
    if entry.training:
        size = options.nodes_per_job or training_group_size(len(names), gpu, entry.defaults.min_gpus)
        check_training_group(min(size, len(names)), gpu, entry.defaults.min_gpus)
        return chunk_nodes(names, domains, size)
    if options.nodes_per_job:
        return chunk_nodes(names, domains, options.nodes_per_job)
    return (NodeGroup("g0", tuple(names), domain=_common_domain(names, domains)),)


def is_diagnose(category: ResolvedCategory) -> bool:
    """Whether the category isolates faults round by round (`testScale: diagnose`, non-training entries)."""
    return not category.entry.training and category.options.test_scale == "diagnose"


def isolation_of(nodes: Sequence[Node], category: ResolvedCategory) -> Isolation:
    """What a diagnose category's rounds are planned from: each eligible node's NVLink domain (ceil(sqrt(N))
    chunks when no node has one) and `minGroupSize` (default 2)."""
    if category.options.placement == "Unpinned":
        raise PlanError("placement Unpinned cannot be combined with testScale diagnose")
    candidates = assign_domains({node_name(node): clique_of(node) for node in nodes})
    minimum = category.options.min_group_size or DEFAULT_MIN_GROUP_SIZE
    return Isolation(domains=tuple((c.node, c.domain) for c in candidates), min_group_size=minimum)


def _unpinned_group(count: int, category: ResolvedCategory, gpu: GpuValues, scale: str | None) -> NodeGroup:
    options, entry = category.options, category.entry
    if entry.grouping == "per-node" or scale in ("intra-node", "intra-rack", "diagnose"):
        what = "a per-node catalog entry" if entry.grouping == "per-node" else f"testScale {scale}"
        raise PlanError(f"placement Unpinned cannot be combined with {what}")
    wanted = options.nodes_per_job
    if wanted is None:
        raise PlanError("placement Unpinned needs nodesPerJob: the scheduler picks exactly that many target nodes")
    if wanted > count:
        raise PlanError(f"placement Unpinned asks for nodesPerJob {wanted} nodes, only {count} eligible")
    if entry.training:
        check_training_group(wanted, gpu, entry.defaults.min_gpus)
    return NodeGroup("g0", (), pinned=False)


def group_by_domain(names: Sequence[str], domains: dict[str, str | None]) -> tuple[NodeGroup, ...]:
    """One group per topology domain (sorted by domain); unlabelled nodes one group each, after them."""
    by_domain: dict[str, list[str]] = {}
    loners = []
    for name in names:
        domain = domains[name]
        if domain is None:
            loners.append(name)
        else:
            by_domain.setdefault(domain, []).append(name)
    members: list[tuple[str | None, list[str]]] = [(domain, sorted(by_domain[domain])) for domain in sorted(by_domain)]
    members += [(None, [name]) for name in sorted(loners)]
    return tuple(NodeGroup(f"g{index}", tuple(nodes), domain=domain) for index, (domain, nodes) in enumerate(members))


def chunk_nodes(names: Sequence[str], domains: dict[str, str | None], size: int) -> tuple[NodeGroup, ...]:
    """ceil(M/N) groups of exactly N nodes (N clamped to M); the short last one borrows and is `overflow`."""
    if size < 1:
        raise PlanError(f"group size must be at least 1, got {size}")
    size = min(size, len(names))
    chunks = _pack(names, domains, size)
    groups = [
        NodeGroup(f"g{index}", tuple(sorted(chunk)), domain=_common_domain(chunk, domains))
        for index, chunk in enumerate(chunks)
    ]
    last = chunks[-1]
    if len(last) < size:
        borrowed = _borrow(chunks, domains, size - len(last))
        nodes = [*last, *borrowed]
        index = len(chunks) - 1
        groups[-1] = NodeGroup(
            f"g{index}{OVERFLOW_SUFFIX}", tuple(sorted(nodes)), overflow=True, domain=_common_domain(nodes, domains)
        )
    return tuple(groups)


def _pack(names: Sequence[str], domains: dict[str, str | None], size: int) -> list[list[str]]:
    """Chunks in plan order: without topology, consecutive names; with it, domain-local chunks first."""
    if not any(domains[name] for name in names):
        return [list(names[start : start + size]) for start in range(0, len(names), size)]
    by_domain: dict[str | None, list[str]] = {}
    for name in sorted(names):
        by_domain.setdefault(domains[name], []).append(name)
    ordered = sorted(by_domain, key=lambda domain: (domain is None, domain or ""))
    chunks: list[list[str]] = []
    remainders: list[tuple[str | None, list[str]]] = []
    for domain in ordered:
        members = by_domain[domain]
        whole = len(members) - len(members) % size
        chunks += [members[start : start + size] for start in range(0, whole, size)]
        if whole < len(members):
            remainders.append((domain, members[whole:]))
    remainders.sort(key=lambda item: (-len(item[1]), item[0] is None, item[0] or ""))
    rest = [name for _, members in remainders for name in members]
    chunks += [rest[start : start + size] for start in range(0, len(rest), size)]
    return chunks


def _borrow(chunks: list[list[str]], domains: dict[str, str | None], count: int) -> list[str]:
    """`count` nodes for the short last chunk, all from one earlier chunk, its host: the chunk with the most
    nodes in the short chunk's domains (the first such), same-domain nodes first, then in plan order. One
    host, so the host group's own step runs the overflow group right after it (`Plan.hosted_by`): no other
    group's nodes are borrowed, so nothing else has to be waited for."""
    short = chunks[-1]
    wanted = {domains[name] for name in short}
    host = max(chunks[:-1], key=lambda chunk: sum(domains[name] in wanted for name in chunk))
    ranked = sorted(host, key=lambda name: domains[name] not in wanted)  # stable: plan order within each rank
    return ranked[:count]


def _common_domain(names: Sequence[str], domains: dict[str, str | None]) -> str | None:
    found = {domains[name] for name in names}
    return found.pop() if len(found) == 1 else None


def _parallelism(gpu: GpuValues) -> str:
    return f"tensor x pipeline parallelism {gpu.tensor_parallel}x{gpu.pipeline_parallel}"


def training_group_size(node_count: int, gpu: GpuValues, min_gpus: int) -> int:
    """The largest n <= node_count with n*gpusPerNode >= minGPUs and divisible by tensor*pipeline."""
    model_parallel = gpu.tensor_parallel * gpu.pipeline_parallel
    for count in range(node_count, 0, -1):
        total = count * gpu.gpus_per_node
        if total >= min_gpus and total % model_parallel == 0:
            return count
    available = node_count * gpu.gpus_per_node
    if available < min_gpus:
        raise PlanError(
            f"needs at least {min_gpus} GPUs (minGPUs); {node_count} eligible node(s) x "
            f"{gpu.gpus_per_node} GPUs per node = {available}"
        )
    raise PlanError(
        f"no group of at most {node_count} node(s) x {gpu.gpus_per_node} GPUs reaches {min_gpus} GPUs (minGPUs) "
        f"with a GPU count divisible by {_parallelism(gpu)}"
    )


def check_training_group(node_count: int, gpu: GpuValues, min_gpus: int) -> None:
    """A training group of `node_count` nodes must reach minGPUs and divide by tensor*pipeline."""
    total = node_count * gpu.gpus_per_node
    model_parallel = gpu.tensor_parallel * gpu.pipeline_parallel
    if total < min_gpus:
        raise PlanError(
            f"a group of {node_count} node(s) x {gpu.gpus_per_node} GPUs = {total} GPUs is below minGPUs {min_gpus}; "
            "raise nodesPerJob or certify more nodes"
        )
    if total % model_parallel:
        raise PlanError(f"a group of {total} GPUs is not divisible by {_parallelism(gpu)} = {model_parallel}")
