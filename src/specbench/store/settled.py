"""Which measured records ``--resume`` must not send again.

A success is settled. So is a request the server refused as malformed (HTTP 400, 413, 422: a
prompt longer than the context, a body the server cannot take): the same request would be
refused again, and a second record of it counts one error twice in every error rate. Everything
else (a timeout, a cut stream, a crash, 401/403/404 that a fixed key or model name cures, 429
and 5xx) is worth another try after a resume.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REFUSED_FOR_GOOD = frozenset({400, 413, 422})


def settled(record: Mapping[str, Any]) -> bool:
    """True when ``record`` needs no second try on ``--resume``."""
    error = record.get("error")
    if error is None:
        return True
    if not isinstance(error, Mapping):
        return False
    return error.get("type") == "http_status" and error.get("status") in REFUSED_FOR_GOOD
