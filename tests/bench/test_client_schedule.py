"""The client bench's statistics (bench/client_schedule.py) and its CPU sampler
(bench/client_overhead.py): what a round resolves, said right."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time

import numpy as np

from tests.support.paths import BENCH

sys.path.insert(0, str(BENCH))
from client_overhead import CpuSampler
from client_schedule import mid_stream_merges, p99_error_interval, ratio_interval

TICK_NS = 2_000_000


Requests = list[tuple[list[float], list[float], list[int]]]


def _requests(n: int, gaps: int, merged_at: set[int] | None = None) -> Requests:
    """n requests streaming side by side, one chunk every 2 ms from t = 0; at each tick in
    ``merged_at`` every stream reads that chunk together with the next (a pause of the client)."""
    merged_at = merged_at or set()
    out = []
    for _ in range(n):
        sent = [k * TICK_NS for k in range(gaps + 1)]
        seen = [sent[k + 1] if k in merged_at else sent[k] for k in range(gaps + 1)]
        client = [(b - a) / 1e6 for a, b in itertools.pairwise(seen)]
        server = [(b - a) / 1e6 for a, b in itertools.pairwise(sent)]
        out.append((client, server, sent[1:]))
    return out


def test_the_error_interval_is_nothing_where_the_client_saw_the_server_gaps() -> None:
    assert p99_error_interval(_requests(32, 400)) == (0.0, 0.0)


def test_a_burst_of_merged_reads_widens_the_interval_around_the_error() -> None:
    # Every stream merges at 4 of 400 ticks, one in each of four of the eight 100 ms stretches:
    # the p99 sits at the edge of the long gaps (1 %), so a draw with more of those stretches
    # reads an error of a whole tick and one with fewer none.
    per_request = _requests(32, 400, merged_at={10, 110, 210, 310})
    client = np.concatenate([np.asarray(c) for c, _, _ in per_request])
    error = np.percentile(client, 99) - 2.0
    lo, hi = p99_error_interval(per_request)
    assert lo <= error <= hi
    assert hi - lo > 0.5


def test_merges_at_a_stream_start_or_end_are_not_counted_as_mid_stream() -> None:
    # 400 gaps: ticks 3, 31, 368 and 395 are within 32 gaps of an edge (the bench's synchronized
    # starts and ends), 32, 200 and 367 in the middle (a pause of the client's); 5 streams each.
    # (Ticks a gap apart would make one long gap and a zero: one merge, not two; so two calls.)
    assert mid_stream_merges(_requests(5, 400, merged_at={3, 31, 368, 395})) == 0
    assert mid_stream_merges(_requests(5, 400, merged_at={32, 200, 367})) == 15


def test_the_ratio_interval_is_the_binomial_order_statistics() -> None:
    assert "too few rounds" in ratio_interval([1.0, 1.1, 1.2, 1.3, 1.4])
    assert ratio_interval([0.9, 0.95, 1.0, 1.05, 1.1, 1.2]).startswith("[0.90-1.20]")
    # n = 12: P(X <= 2) = 79/4096 <= 2.5 % < P(X <= 3), so the 3rd and the 10th.
    assert ratio_interval([float(k) for k in range(1, 13)]).startswith("[3.00-10.00]")


def test_the_sampler_counts_a_child_started_after_it() -> None:
    """The tree is walked every TREE_S, per-process CPU read in between: a worker the client
    starts once it runs is still counted."""
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass"
    run = f"subprocess.run([sys.executable, '-c', {busy!r}])"
    script = f"import subprocess, sys, time\ntime.sleep(0.2)\n{run}"
    parent = subprocess.Popen([sys.executable, "-c", script])
    sampler = CpuSampler(parent.pid)
    sampler.TREE_S = 0.05
    seen = [sampler.cpu()]  # the parent alone
    while parent.poll() is None:
        seen.append(sampler.cpu())
        time.sleep(0.02)
    assert seen[0] < 0.3
    assert max(seen) >= 0.5  # the child's own CPU, which only the walk finds
