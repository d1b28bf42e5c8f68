"""Open-loop arrivals: seeded schedules with the asked mean rate and burstiness, the ramp, the
concurrency cap and the lateness each send records; LATE_SENDS when the schedule was not kept."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from specbench.analysis.findings.client import schedule_findings
from specbench.store.record import Record
from specbench.workloads.arrivals import open_loop, schedule


def test_schedule_is_seeded_with_the_asked_rate_and_burstiness() -> None:
    a = schedule(20000, rate=50.0, burstiness=1.0, seed=3)
    assert a == schedule(20000, rate=50.0, burstiness=1.0, seed=3) and a != schedule(20000, 50.0, 1.0, seed=4)
    assert a[0] == 0.0 and (np.diff(a) >= 0).all()
    gaps = {b: np.diff(schedule(20000, 50.0, b, seed=1)) for b in (0.25, 1.0, 4.0)}
    for b, g in gaps.items():
        assert abs(g.mean() - 1 / 50) < 0.05 / 50  # mean gap 1/rate whatever the shape
        assert abs(g.std() / g.mean() - 1 / np.sqrt(b)) < 0.05  # gamma: CV = 1/sqrt(shape)


def test_ramp_up_sends_fewer_requests_early_and_full_rate_after() -> None:
    flat, ramped = (
        np.array(schedule(4000, 100.0, seed=2)),
        np.array(schedule(4000, 100.0, seed=2, ramp_up_s=10.0)),
    )
    assert (ramped >= flat).all()
    assert (ramped < 10.0).sum() < 0.6 * (flat < 10.0).sum()  # half the arrivals in a linear ramp
    late = ramped > 10.0
    assert np.allclose(ramped[late] - flat[late], 5.0)  # after the ramp: same gaps, shifted by R/2


def test_open_loop_caps_in_flight_and_records_the_wait() -> None:
    sent: list[dict[str, Any]] = []
    in_flight, peak = 0, 0

    async def send(item: int, timing: dict[str, Any]) -> None:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        sent.append({"item": item, **timing})
        await asyncio.sleep(0.05)
        in_flight -= 1

    asyncio.run(open_loop([0, 1, 2, 3], [0.0, 0.0, 0.0, 0.0], 2, send))
    assert peak == 2 and sorted(s["item"] for s in sent) == [0, 1, 2, 3]
    waited = sorted(s["cap_wait_ms"] for s in sent)
    assert waited[2] >= 40.0 and waited[3] >= 40.0  # the last two waited a 50 ms send for a slot
    assert all(s["lateness_ms"] >= s["cap_wait_ms"] - 1.0 for s in sent)


def test_late_sends_named_with_cap_wait_and_own_delay() -> None:
    on_time = [{"arm": "a", "lateness_ms": 0.5, "cap_wait_ms": 0.0} for _ in range(50)]
    late = [
        {"arm": "b", "lateness_ms": 80.0, "cap_wait_ms": 70.0, "arrival": {"rate": 20}} for _ in range(50)
    ]
    found = schedule_findings([Record.read(r) for r in [*on_time, *late, {"arm": "c", "warmup": False}]])
    assert [(f.code, f.arms) for f in found] == [("LATE_SENDS", ("b",))]
    assert "70.0 ms of it waiting" in found[0].evidence and "10.0 ms the client's own" in found[0].evidence
