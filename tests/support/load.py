"""A controlled load for the A/A tests and bench/aa_bias.py: hogs a test starts and stops itself.

Issue 27's A/A bias showed on a machine busy with other llama-server benchmarks, whose decode
streams the weights from memory, and not under plain busy loops: a server of the tiny lab model
keeps its few MB of weights in its core's L2 cache, which a memory-streaming neighbour evicts and
a busy loop does not. ``mem`` is such a neighbour (a copy loop over arrays far larger than any
cache), ``cpu`` a busy loop. Each runs in its own process, killed on exit even when the test fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

_HOGS = {
    # 2 × 256 MB arrays: every pass streams half a gigabyte through the caches.
    "mem": (
        "import numpy as np\na = np.ones(32 * 2**20)\nb = np.empty_like(a)\n"
        "while True:\n    np.copyto(b, a)\n"
    ),
    "cpu": "while True:\n    pass\n",
}


@contextmanager
def controlled_load(hogs: Sequence[str], nice: int = 0, cpus: set[int] | None = None) -> Iterator[list[int]]:
    """Start one process per hog (``"mem"``, ``"cpu"``) for the body, at ``nice``, on ``cpus``
    (None: wherever the scheduler puts them); yields their pids."""
    argv = ["nice", "-n", str(nice)] if nice else []
    procs = [subprocess.Popen([*argv, sys.executable, "-c", _HOGS[h]]) for h in hogs]
    for p in procs:
        if cpus:
            os.sched_setaffinity(p.pid, cpus)
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
