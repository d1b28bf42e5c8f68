"""The measuring client: one request in, its raw timed stream out.

Step 6 of the flow matrix → workloads → run → executors → engines → transport → client → store →
analysis (theory) → report.

Takes in one request (a chat body) and a server URL and hands back the raw stream: :mod:`stream`
streams a request and keeps per-chunk ``perf_counter_ns`` stamps and no statistics,
:mod:`readstamps` stamps each socket read with the kernel's receive time (else the loop's poll;
the clocks are :mod:`clocks`') and keeps an SSE body raw read by read (:mod:`rawbody`),
:mod:`follow` parses streams as they stream, off the read path, :mod:`pool` runs client worker
processes when one event loop cannot keep up with a server's stream
(``python -m specbench.client.pool``), and :mod:`looplag` measures the client's own event-loop
lag while a cell streams. Hands each request's record to ``run.drive``, which writes it to
``store`` (the next step). docs/client.md describes the whole.
"""

from __future__ import annotations
