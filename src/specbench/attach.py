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

import httpx

from specbench.config import Matrix, check_arm_name
from specbench.engines.http import get_json
from specbench.engines.openai import KNOWN_ENGINES, detect_engine
from specbench.errors import ConfigError, EngineError, StoreError
from specbench.store import RunStore


def parse_arm_args(text: str | None) -> tuple[str, ...] | None:
    """``--arm-args "-md d.gguf --spec-type draft-simple"`` as words, as a shell would split them."""
    if text is None:
        return None
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise ConfigError(f"--arm-args: {exc}") from None


def probe(url: str) -> tuple[str, dict[str, Any]]:
    """Which engine answers at ``url`` and the version it reports; an error when nothing does."""
    return asyncio.run(_probe(url.rstrip("/")))


async def _probe(base: str) -> tuple[str, dict[str, Any]]:
    async with httpx.AsyncClient(timeout=10.0) as client:
        try:
            await client.get(f"{base}/v1/models")
        except httpx.HTTPError as exc:
            # Measuring a server that is not there gives 100 % failed requests and no finding.
            raise EngineError(f"--attach {base}: nothing answers ({type(exc).__name__}: {exc})") from None
        kind = await detect_engine(base, client)
        return kind, await _version(client, base, kind)


async def _version(client: httpx.AsyncClient, base: str, kind: str) -> dict[str, Any]:
    """The version as the server states it: llama.cpp /props ``build_info`` (``b<N>-<commit>``),
    vLLM /version, SGLang /get_server_info ``version``."""
    if kind == "llamacpp":
        props = await get_json(client, f"{base}/props")
        build = props.get("build_info") if isinstance(props, dict) else None
        if isinstance(build, str):
            number, _, commit = build.partition("-")  # as `llama-server --version` gives them
            digits = number.removeprefix("b")
            found = {"build_number": int(digits)} if digits.isdigit() else {}
            return {"version": build, "build_info": build, "commit": commit or None, **found}
        return {}
    path = "/version" if kind == "vllm" else "/get_server_info"
    body = await get_json(client, base + path)
    version = body.get("version") if isinstance(body, dict) else None
    return {"version": version} if isinstance(version, str) else {}


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
    engine = kind if kind in KNOWN_ENGINES else "openai"
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
