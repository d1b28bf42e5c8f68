"""The machine numbers the theory uses, measured while the run runs and stored in its directory.

A CPU's bandwidth depends on what else the machine is doing: the same 2-core VM read 20.0 GB/s
once and 9.9–12.1 GB/s on re-runs. Probed when a report is rendered, the prediction for one run
would change from day to day. So the runner probes once, before the first engine starts (the
machine then runs nothing of ours), and writes ``machine_probe.json``::

    {"version": 1, "measured_at": ..., "cpu": {"bandwidth_gbs", "tflops", "memory_gb",
     "copy_bytes", "reps"}}

``report`` and ``predict --calibrate`` only read it back (:func:`stored_cpu`); a run directory
without it (older specbench, an imported run) gets a ConfigError saying so, never a probe of
the machine that renders the report. A resumed run keeps its first probe. The forward probe
(verify cost) is stored per baseline cell in ``cells.jsonl`` (:mod:`specbench.run.forwardprobe`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specbench.errors import ConfigError
from specbench.store.rundir import now_iso
from specbench.store.safeio import write_atomic
from specbench.theory.hardware import PROBE_BYTES, PROBE_REPS, Gpu, probe_cpu

FILENAME = "machine_probe.json"
VERSION = 1


def record_machine_probe(run_dir: Path) -> dict[str, Any]:
    """Probe this machine and store the result in ``run_dir``, unless a probe is stored already."""
    path = run_dir / FILENAME
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        pass  # none yet (or unreadable): probe now
    gpu = probe_cpu()
    data = {
        "version": VERSION,
        "measured_at": now_iso(),
        "cpu": {
            "bandwidth_gbs": gpu.bandwidth_gbs,
            "tflops": gpu.tflops,
            "memory_gb": gpu.memory_gb,
            "copy_bytes": PROBE_BYTES,
            "reps": PROBE_REPS,
        },
    }
    write_atomic(path, json.dumps(data, indent=1))  # a crash never leaves half a probe; full disk: exit 5
    return data


def stored_cpu(run_dir: Path) -> Gpu:
    """The ``cpu`` device as probed while ``run_dir`` ran; ConfigError when the run stores none."""
    path = run_dir / FILENAME
    if not path.is_file():
        raise ConfigError(
            f"{path} is missing: this run stores no machine probe (specbench probes the machine "
            "while a run runs, never when a report is rendered); re-run it with this specbench"
        )
    try:
        cpu = json.loads(path.read_text(encoding="utf-8"))["cpu"]
        bandwidth = float(cpu["bandwidth_gbs"])
        gpu = Gpu(
            name="cpu",
            bandwidth_gbs=bandwidth,
            tflops=float(cpu["tflops"]),
            memory_gb=float(cpu.get("memory_gb", 0.0)),
            unified=True,
            host_link_gbs=bandwidth,
        )
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"{path}: unreadable machine probe ({err})") from None
    if not (gpu.bandwidth_gbs > 0 and gpu.tflops > 0):
        raise ConfigError(f"{path}: bandwidth_gbs and tflops must be positive")
    return gpu
