"""How a plan is stored in its ConfigMap (`group-nodes-<id>`), and read back from one.

The plan step writes it; the run step (its group's nodes), the record step and the watcher read it. Argo only
ever sees group names, so this ConfigMap is where node lists live, and it must stay below the 1 MiB object
limit at 10,000 nodes: both keys are gzip (deterministic) in `binaryData`, which keeps 10,000 names of 42
characters near 100 KiB where the plain JSON took 877 KiB.

- `binaryData["group-nodes.json.gz"]`: gzip of `{"<group>": ["<node>", ...]}` (the reference's layout);
- `binaryData["plan.json.gz"]`: gzip of `Plan.to_json()`.

ConfigMaps written before compression (`data["plan.json"]`, plain JSON) are still read.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
from collections.abc import Mapping
from typing import Any

from nvcre_argo.plan.model import Plan, PlanError
from nvcre_argo.results import base64_text, gzip_bytes

GROUP_NODES_KEY = "group-nodes.json.gz"
PLAN_KEY = "plan.json.gz"
LEGACY_PLAN_KEY = "plan.json"


def plan_binary_data(plan: Plan) -> dict[str, str]:
    """The ConfigMap's `binaryData`: the group nodes and the full plan, each gzip then base64."""
    group_nodes = {group.name: list(group.nodes) for group in plan.groups}
    return {
        GROUP_NODES_KEY: base64_text(gzip_bytes(json.dumps(group_nodes, sort_keys=True).encode())),
        PLAN_KEY: base64_text(gzip_bytes(plan.to_json().encode())),
    }


def plan_from_configmap(configmap: Mapping[str, Any]) -> Plan:
    """The plan a ConfigMap holds (compressed, or the older plain `data["plan.json"]`); PlanError otherwise."""
    binary = configmap.get("binaryData") or {}
    if PLAN_KEY in binary:
        try:
            text = gzip.decompress(base64.b64decode(binary[PLAN_KEY], validate=True)).decode("utf-8")
        except (binascii.Error, OSError, EOFError, UnicodeDecodeError, ValueError) as error:
            raise PlanError(f"binaryData[{PLAN_KEY!r}]: not gzip JSON in base64: {error}") from None
        return Plan.from_json(text)
    legacy = (configmap.get("data") or {}).get(LEGACY_PLAN_KEY)
    if isinstance(legacy, str):
        return Plan.from_json(legacy)
    raise PlanError(f"holds neither binaryData[{PLAN_KEY!r}] nor data[{LEGACY_PLAN_KEY!r}]")
