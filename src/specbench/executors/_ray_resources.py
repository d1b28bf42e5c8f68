"""What a cell asks Ray for, and what it ran on.

Requests are flat (``{"specbench_slot": 1, "accelerator_type:H100": 0.001}``) until a task is
submitted, when :func:`task_options` turns them into ``.options()`` keywords. By default a cell
holds its node alone (:func:`exclusive_request`), and with ``same_hardware`` every cell after
the first asks for the accelerator type of the node the first one ran on (:func:`accelerator_pin`).
Afterwards :func:`hardware_by_arm` tells from the cells' lines whether arms ran on different
hardware, which the driver reports as a confound.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import ray  # type: ignore[import-not-found, unused-ignore]

from specbench.executors._ray_common import hardware_labels
from specbench.store.rundir import RunStore

TASK_OPTIONS = ("num_cpus", "num_gpus", "memory")
SLOT = "specbench_slot"  # custom resource, 1 per node: a cell holds its node alone
ACCELERATOR = "accelerator_type:"


# == requests =====================================================================================
def exclusive_request() -> dict[str, Any]:
    """One cell per node: the ``specbench_slot`` resource (``ray start --resources
    '{"specbench_slot": 1}'`` on every node) when the cluster has it, else every CPU of the
    smallest node."""
    if SLOT in ray.cluster_resources():  # type: ignore[no-untyped-call, unused-ignore]
        return {SLOT: 1}
    nodes = ray.nodes()  # type: ignore[no-untyped-call, unused-ignore]
    cpus = [n["Resources"].get("CPU", 1) for n in nodes if n.get("Alive")]
    return {"num_cpus": min(cpus) if cpus else 1}


def task_options(request: Mapping[str, Any]) -> dict[str, Any]:
    """A flat resource request → ``.options()`` keywords (custom names under ``resources``)."""
    opts: dict[str, Any] = {}
    custom: dict[str, float] = {}
    for key, value in request.items():
        if key in TASK_OPTIONS:
            opts[key] = value
        elif key == "resources" and isinstance(value, Mapping):
            custom.update({str(k): float(v) for k, v in value.items()})
        else:
            custom[key] = float(value)
    if custom:
        opts["resources"] = custom
    return opts


def names_accelerator(keys: Iterable[str]) -> bool:
    """Whether a request already names an accelerator type (then it is never pinned)."""
    return any(k.startswith(ACCELERATOR) for k in keys)


def accelerator_pin(node_resources: Mapping[str, Any]) -> dict[str, float]:
    """A token amount of each accelerator type a node has: asking for it keeps later cells on
    that GPU model without competing for the node's GPUs."""
    return {k: 0.001 for k in node_resources if k.startswith(ACCELERATOR)}


# == hardware =====================================================================================
def node_hardware(ray_node: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """A node's hardware summary for its cells' lines: Ray's labels, GPU names and CPU."""
    return {
        "labels": hardware_labels(ray_node.get("resources", {}), ray_node.get("labels", {})),
        "gpus": sorted(g.get("name", "") for g in env.get("gpus") or []),
        "cpu": env.get("cpu"),
    }


def json_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def hardware_by_arm(store: RunStore) -> dict[str, list[dict[str, Any]]]:
    """The distinct hardware each arm's cells ran on (cells without a ``hardware`` field ran
    locally, on the machine env.json describes)."""
    local = store.env()
    local_hw = {"labels": [], "gpus": sorted(g.get("name", "") for g in local.get("gpus") or []),
                "cpu": local.get("cpu")}  # fmt: skip
    seen: dict[str, dict[str, dict[str, Any]]] = {}
    for cell in store.cells():
        if cell.get("lost"):
            continue
        hw = cell.get("hardware") or local_hw
        seen.setdefault(cell["arm"], {})[json_key(hw)] = hw
    return {arm: list(v.values()) for arm, v in seen.items()}
