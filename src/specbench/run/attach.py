"""Attach mode as a first-class arm: the server runs elsewhere, the user says what it runs.

An attached server is one arm of a comparison like any launched one. The user names it
(``--arm``) and gives the flags it was started with (``--arm-args``, or the matrix's ``arms:``
entry of that name), so the speculation checks, acceptance and report sections apply. The engine
that answers is detected before anything is measured and recorded as that engine with the version
the server reports, and several attached servers measured with ``--resume`` into one run
directory become the arms of one comparison.
"""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from specbench.engines import ENGINES
from specbench.engines.base import parse_metrics
from specbench.engines.openai import UNKNOWN, AttachedEngine, detect_engine
from specbench.errors import ClientError, ConfigError, EngineError, StoreError
from specbench.matrix.config import Matrix
from specbench.matrix.names import check_arm_name
from specbench.store.redact import mask_url_passwords
from specbench.store.rundir import RunStore
from specbench.transport import Http, open_http


def parse_arm_args(text: str | None) -> tuple[str, ...] | None:
    """``--arm-args "-md d.gguf --spec-type draft-simple"`` as words, as a shell would split them."""
    if text is None:
        return None
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise ConfigError(f"--arm-args: {exc}") from None


def check_attach_url(url: str) -> str:
    """``--attach`` as a URL the client can reach: http(s), a host, a port in 1..65535. Checked
    here, where the flag enters: the client would fail deep in its connection pool."""
    shown = mask_url_passwords(url)[:200]  # errors are printed: never a URL's password
    if "\x00" in url or any(c.isspace() for c in url):
        raise ConfigError(f"--attach: {shown[:80]!r} is not a URL (it holds a NUL byte or a space)")
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError when out of range or not a number
    except ValueError as exc:
        raise ConfigError(f"--attach {shown}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--attach {shown}: give the server's URL, e.g. http://127.0.0.1:8080")
    if port == 0:
        raise ConfigError(f"--attach {shown}: port 0 is not a port a server listens on")
    return url


def attach_engine(matrix: Matrix, url: str) -> AttachedEngine:
    """The engine that measures the server at ``url``: the one detected there, or the matrix's own
    where that engine measures whatever answers (``detect_on_attach`` False)."""
    named = ENGINES[matrix.engine]
    kind = None if named.detect_on_attach else named.kind
    return AttachedEngine(*identify_server(check_attach_url(url), kind), redetect=kind is None)


def identify_server(url: str, kind: str | None = None) -> tuple[str, dict[str, Any]]:
    """Which engine answers at ``url`` (``kind`` when already known) and the version it reports;
    an error when nothing does."""
    return asyncio.run(_identify(url.rstrip("/"), kind))


async def _identify(base: str, known: str | None) -> tuple[str, dict[str, Any]]:
    async with open_http(10.0) as client:
        try:
            await client.get(f"{base}/v1/models")
        except ClientError as exc:
            # Measuring a server that is not there gives 100 % failed requests and no finding.
            why = mask_url_passwords(str(exc))  # names the failure: "ClientConnectorError: ..."
            raise EngineError(f"--attach {mask_url_passwords(base)}: nothing answers ({why})") from None
        kind = known or await detect_engine(base, client)
        await _check_metrics(client, base)
        return kind, await ENGINES[kind].stated_version(client, base)


async def _check_metrics(client: Http, base: str) -> None:
    """A /metrics that answers 200 must be Prometheus text: each cell's scrape is parsed, and a
    server that answers ``{}`` there is not one whose counters can be read (refused now, before
    anything is measured, rather than failing after the first cell)."""
    try:
        resp = await client.get(f"{base}/metrics")
    except ClientError:
        return  # no metrics endpoint: measured without the server's counters
    if resp.status_code != 200:
        return
    try:
        parse_metrics(resp.text)
    except ValueError:
        start = " ".join(resp.text[:60].split())
        raise EngineError(
            f"--attach {mask_url_passwords(base)}: /metrics answers, but not in the Prometheus text "
            f"format (it starts "
            f"{start!r}); start the server with its metrics in that format, or disable them"
        ) from None


def attach_matrix(
    matrix: Matrix, arm: str | None, arm_args: tuple[str, ...] | None, kind: str, out: Path, resume: bool
) -> Matrix:
    """The matrix of an attached run: the arms measured into ``out`` so far plus this one.

    The arm's flags are ``arm_args``, else the matrix's ``arms:`` entry of that name, else none
    (not known to speculate). The matrix's engine becomes the detected one, so flags read as that
    engine's. The baseline is the matrix's ``baseline`` once that arm has been attached."""
    name = arm or "attached"
    try:
        check_arm_name(name)  # it names files in the run directory: no "../../x"
    except ValueError as exc:
        raise ConfigError(f"--arm: {exc}") from None
    args = tuple(arm_args if arm_args is not None else matrix.arms.get(name, ()))
    earlier = _earlier_arms(out, resume)
    if name in earlier and earlier[name] != args:
        # One arm, two servers started differently: its records would mix two configurations.
        raise ConfigError(
            f"--arm {name}: {out} measured it with flags {list(earlier[name])}, now {list(args)}; "
            "name the arm differently"
        )
    arms = {**earlier, name: args}
    baseline = matrix.baseline if matrix.baseline in arms else next(iter(arms))
    engine = kind if kind in ENGINES and ENGINES[kind].attachable else UNKNOWN
    return matrix.model_copy(update={"arms": arms, "baseline": baseline, "engine": engine})


def _earlier_arms(out: Path, resume: bool) -> dict[str, tuple[str, ...]]:
    if not resume or not (out / "manifest.json").is_file():
        return {}
    try:
        old = RunStore(out).manifest().get("matrix") or {}
    except StoreError:
        return {}
    arms = old.get("arms") if isinstance(old, dict) else None
    return {str(k): tuple(v) for k, v in arms.items()} if isinstance(arms, dict) else {}
