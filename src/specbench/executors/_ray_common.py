"""What the Ray cell executor and the Ray load generator share: the driver's inbox, the relay
workers send through, node names and descriptions, and clock comparison."""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable
from typing import Any

import ray  # type: ignore[import-not-found, unused-ignore]
from ray.util.scheduling_strategies import (  # type: ignore[import-not-found, unused-ignore]
    NodeAffinitySchedulingStrategy,
)

#: Ray resource names that describe hardware (Ray sets ``accelerator_type:<GPU model>`` itself).
HARDWARE_PREFIXES = ("accelerator_type:",)
#: Ray node labels that describe hardware.
HARDWARE_LABELS = ("ray.io/accelerator-type", "ray.io/market-type", "ray.io/node-group")


class Inbox:
    """An actor on the driver's node holding messages until the driver drains them. Calls from
    one worker run in the order sent, so a worker's records arrive in order and before its
    task's result is visible to the driver (workers wait for each put)."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def put(self, item: dict[str, Any]) -> None:
        self.items.append(item)

    def drain(self) -> list[dict[str, Any]]:
        out, self.items = self.items, []
        return out


def start_inbox() -> Any:
    """An :class:`Inbox` pinned (softly) to the driver's node, which outlives any worker node."""
    here = ray.get_runtime_context().get_node_id()
    actor = ray.remote(Inbox).options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=True)
    )
    return actor.remote()


class Relay:
    """The worker's end: every message is delivered before ``send`` returns.

    It waits on the call's future, not with ``ray.get``: a task blocked in ``ray.get`` hands its
    CPUs back to the scheduler, which would start another cell on them while this one measures.
    """

    def __init__(self, inbox: Any, tag: str, timeout: float = 600.0) -> None:
        self.inbox = inbox
        self.tag = tag
        self.timeout = timeout

    def send(self, kind: str, **payload: Any) -> None:
        ref = self.inbox.put.remote({"tag": self.tag, "kind": kind, **payload})
        ref.future().result(timeout=self.timeout)


def node_identity() -> dict[str, Any]:
    """This worker's node: Ray node id, host name, IP and process id."""
    return {
        "node_id": ray.get_runtime_context().get_node_id(),
        "host": socket.gethostname(),
        "ip": ray.util.get_node_ip_address(),  # type: ignore[no-untyped-call, unused-ignore]
        "pid": os.getpid(),
    }


def node_name(host: str, node_id: str) -> str:
    """A file-name-safe, human-readable node name: ``<host>-<first 8 of node id>``."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", host) or "node"
    return f"{safe}-{node_id[:8]}"


def pinned(node_id: str, soft: bool = False) -> NodeAffinitySchedulingStrategy:
    return NodeAffinitySchedulingStrategy(node_id, soft=soft)


def node_table() -> dict[str, dict[str, Any]]:
    """Ray's view of every node: host, IP, total resources, labels, alive."""
    out = {}
    for n in ray.nodes():  # type: ignore[no-untyped-call, unused-ignore]
        out[n["NodeID"]] = {
            "host": n.get("NodeManagerHostname", ""),
            "ip": n.get("NodeManagerAddress", ""),
            "resources": dict(n.get("Resources") or {}),
            "labels": dict(n.get("Labels") or {}),
            "alive": bool(n.get("Alive")),
        }
    return out


def hardware_labels(resources: dict[str, Any], labels: dict[str, Any]) -> list[str]:
    """The hardware-describing resource names and labels of a node, e.g. ``accelerator_type:H100``."""
    found = [k for k in resources if k.startswith(HARDWARE_PREFIXES)]
    found += [f"{k}={v}" for k, v in labels.items() if k in HARDWARE_LABELS]
    return sorted(found)


def remote_time() -> float:
    return time.time()


def clock_offset(ping: Callable[[], float], pings: int = 5) -> dict[str, float]:
    """Offset of a worker's ``time.time()`` from this process's, from the ping with the shortest
    round trip (NTP's estimate): offset = remote - midpoint, good to within ±rtt/2."""
    best: tuple[float, float] | None = None
    for _ in range(pings):
        t0 = time.time()
        remote = ping()
        t1 = time.time()
        rtt, offset = t1 - t0, remote - (t0 + t1) / 2
        if best is None or rtt < best[0]:
            best = (rtt, offset)
    assert best is not None
    return {"clock_offset_s": best[1], "rtt_s": best[0], "pings": float(pings)}


def node_clock(node_id: str, pings: int = 5) -> dict[str, float]:
    """:func:`clock_offset` of a node, through zero-CPU tasks pinned to it."""
    task = ray.remote(remote_time).options(num_cpus=0, scheduling_strategy=pinned(node_id))
    ray.get(task.remote())  # a worker process ready on that node: the pings then time only the RPC
    return clock_offset(lambda: float(ray.get(task.remote())), pings)
