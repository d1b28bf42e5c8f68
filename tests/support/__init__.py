"""Helpers the tests import, in one place, by topic; fixtures stay in the conftest.py files.

- ``paths``: the repository's root and the data files tests read.
- ``lab``: a lab target/draft pair and its ground truth (``Pair``, ``lab_pair``).
- ``matrices``: small matrix files over short prompts for the real llama-server, draft arms.
- ``serve``: one llama-server serving a lab pair for the body of a ``with``.
- ``procs``: processes a test starts or must find: Ctrl-C-able children, the CLI as a child,
  engines tagged per test, a tmpfs for a full disk.
- ``synth``: SYNTHETIC run directories (no engine; every number made up), their records built
  through :mod:`specbench.store.schema`.
- ``records``: writing and editing ``records.jsonl`` / ``cells.jsonl`` lines through the schema.
- ``runners``: a runner with the executor seam and no engine.
- ``argtable``: a fake ``llama-server`` that prints the stored ``--help``.
- ``load``: a controlled background load (memory- or CPU-bound hogs).
- ``marks``: which fixtures need an engine, so the root conftest marks their tests ``engine``.

Fake engine servers (vLLM, SGLang, llama-server wire formats) are their own package, tests/fakes.
"""
