"""The one exception hierarchy of specbench.

Every error a user can cause or meet derives from :class:`SpecbenchError` and carries a
one-line, actionable message naming the file, field or flag at fault. Third-party errors
(aiohttp's through specbench.transport, pydantic, yaml, subprocess) are translated into these
where they enter, so the CLI maps exactly one family to exit codes::

    SpecbenchError                 exit 1   anything specbench reports
    ├── ConfigError                exit 2   a matrix file, flag or value is wrong
    │   └── YamlSyntaxError                 not YAML: the line, then the text with a caret
    ├── InstallError               exit 3   llama-server could not be fetched or built
    ├── EngineError                exit 4   an engine would not start, crashed or misbehaved
    │   └── EngineStartError                the process exited or never became healthy
    │       ├── PortTakenError              another process answers on the engine's port
    │       └── ArmStartError               a run ended with an arm whose engine would not start
    ├── ClientError                         a request failed at the HTTP/SSE level, or a client worker died
    ├── StoreError                 exit 5   a run directory is missing, damaged, mismatched or locked
    │   ├── DiskFullError          exit 5   a write failed for lack of space (resumable)
    │   └── ModelChangedError      exit 5   a model file differs from the one the run measured
    ├── RunIncompleteError         exit 6   the run ended but an arm failed or nothing was measured
    └── LabError                            a lab model could not be made or checked

    Ctrl-C, SIGTERM or SIGHUP      exit 130 records so far are kept; continue with --resume
"""

from __future__ import annotations


class SpecbenchError(Exception):
    """Base class; ``str(err)`` is the one line shown to the user."""

    exit_code = 1


class ConfigError(SpecbenchError):
    exit_code = 2


class YamlSyntaxError(ConfigError):
    """A matrix that is not YAML. ``str(err)`` is still the one line (file:line:column and the
    parser's problem); ``snippet`` is the offending text with a caret under the column, shown
    indented below it, because a caret flattened onto one line points at nothing."""

    def __init__(self, message: str, snippet: str = "") -> None:
        super().__init__(message)
        self.snippet = snippet


class InstallError(SpecbenchError):
    exit_code = 3


class EngineError(SpecbenchError):
    exit_code = 4


class EngineStartError(EngineError):
    """The engine exited or never became healthy; ``log_tail`` holds its last log lines."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


class PortTakenError(EngineStartError):
    """Another process answered on the engine's port: nothing it says may be stored as data."""


class ArmStartError(EngineStartError):
    """The run ended with an arm whose engine would not start (its model would not load, a flag
    it refuses). Raised after the summary, like :class:`RunIncompleteError`, and the records so far
    are kept (``--resume``): exit 4, because the fix is the engine's input, not the measurement."""


class ClientError(SpecbenchError):
    pass


class StoreError(SpecbenchError):
    exit_code = 5


class DiskFullError(StoreError):
    """A record could not be written; the journal was truncated back to its last whole line."""


class ModelChangedError(StoreError):
    """A model file a launch would serve differs from the one earlier launches of the run served:
    going on would compare two models in one run. Resumable once the measured file is back."""


class RunIncompleteError(SpecbenchError):
    """The run finished, but its data cannot answer the question: an arm failed, or no request
    succeeded. Raised after the summary is printed, so the reason is the console's last line."""

    exit_code = 6


class LabError(SpecbenchError):
    pass
