"""Measuring the wrong server: another HTTP server holds the port the engine was given.

The other server is a FAKE (a tiny http.server answering 200 everywhere): a real engine cannot
be made to lose this race on purpose. The engine is the real llama-server.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from specbench import api
from specbench.engines import process
from specbench.engines.llamacpp import LlamaCppEngine
from specbench.engines.process import ServerProcess
from specbench.errors import PortTakenError
from specbench.store.rundir import RunStore
from tests.support.lab import Pair
from tests.support.procs import kill_all, tag, tagged_matrix

pytestmark = pytest.mark.engine


class _Impostor(BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def _answer(self) -> None:
        _Impostor.hits.append(self.path)
        body = b'{"status": "ok"}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def impostor() -> Iterator[int]:
    """FAKE: some other server already listening on a port specbench will pick."""
    _Impostor.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Impostor)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def test_an_answer_from_another_server_is_refused(
    llama_server: Path, dense_pair: Pair, tmp_path: Path, impostor: int
) -> None:
    name = tag()
    engine = LlamaCppEngine(llama_server)
    argv = engine.command(str(dense_pair.target), ["--alias", name], "127.0.0.1", impostor)
    server = ServerProcess(argv, tmp_path / "engine.log")
    try:
        with pytest.raises(PortTakenError, match=f"port {impostor} is answered by another process"):
            server.start(f"http://127.0.0.1:{impostor}/health", timeout=60)
    finally:
        orphans = kill_all(name)
    assert _Impostor.hits == ["/health"] and orphans == 0


def test_the_run_moves_to_a_free_port_and_stores_nothing_from_the_impostor(
    llama_server: Path,
    dense_pair: Pair,
    tmp_path: Path,
    impostor: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ports = [impostor]
    real = process.free_port
    monkeypatch.setattr("specbench.run.launch.free_port", lambda host: ports.pop() if ports else real(host))
    name = tag()
    matrix = tagged_matrix(tmp_path, dense_pair, llama_server, name, repeats=1, forward_probe=False)
    try:
        api.prepare_run(matrix, tmp_path / "run").run()
    finally:
        kill_all(name)
    store = RunStore(tmp_path / "run")
    assert store.manifest()["arms"]["baseline"]["status"] == "ok"
    assert len(store.completed()) == 3
    assert all(f":{impostor}" not in c["base_url"] for c in store.cells())
    assert not [h for h in _Impostor.hits if h != "/health"]
