"""The one exception hierarchy of specbench.

Every error a user can cause or meet derives from :class:`SpecbenchError` and carries a
one-line, actionable message naming the file, field or flag at fault. Third-party errors
(httpx, pydantic, yaml, subprocess) are translated into these where they enter, so the
CLI maps exactly one family to exit codes::

    SpecbenchError                 exit 1   anything specbench reports
    ├── ConfigError                exit 2   a matrix file, flag or value is wrong
    ├── InstallError               exit 3   llama-server could not be fetched or built
    ├── EngineError                exit 4   an engine would not start, crashed or misbehaved
    │   └── EngineStartError                the process exited or never became healthy
    ├── ClientError                         a request failed at the HTTP/SSE level
    ├── StoreError                          a run directory is missing, corrupt or mismatched
    └── LabError                            a lab model could not be made or checked
"""

from __future__ import annotations


class SpecbenchError(Exception):
    """Base class; ``str(err)`` is the one line shown to the user."""

    exit_code = 1


class ConfigError(SpecbenchError):
    exit_code = 2


class InstallError(SpecbenchError):
    exit_code = 3


class EngineError(SpecbenchError):
    exit_code = 4


class EngineStartError(EngineError):
    """The engine exited or never became healthy; ``log_tail`` holds its last log lines."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


class ClientError(SpecbenchError):
    pass


class StoreError(SpecbenchError):
    pass


class LabError(SpecbenchError):
    pass
