"""The command-line application: the one error boundary, exit codes and signal handling."""

from __future__ import annotations

import errno
import os
import signal
import sys
from types import FrameType
from typing import Any, NoReturn

import typer
from typer import _click as click
from typer.core import TyperGroup

from specbench.errors import ConfigError, SpecbenchError, YamlSyntaxError
from specbench.run.console import console, printable

EXIT_CODES = (
    "Exit codes: 0 done; 1 other error; 2 bad matrix, flag or value; 3 llama-server build failed; "
    "4 an engine would not start; 5 run directory missing, damaged, locked or disk full "
    "(resumable); 6 run finished but an arm failed or no request succeeded; "
    "130 interrupted (Ctrl-C, SIGTERM, SIGHUP: continue with --resume)."
)


class _Boundary(TyperGroup):
    """The one error boundary: a library error raised anywhere under a command (sub-commands
    included) becomes one line on stderr and its documented exit code. It sits on the click group,
    not in ``_App.__call__``, so the test runner, which invokes the group directly, sees it too."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SpecbenchError as err:
            _print_error(err)
            raise typer.Exit(err.exit_code) from None
        except OSError as err:
            # The net under the checks where paths enter (paths.path_problem): a path the kernel
            # refuses as too long is the user's input, not specbench's fault.
            if err.errno != errno.ENAMETOOLONG:
                raise
            name = str(err.filename or "a path")
            short = name if len(name) <= 80 else name[:79] + "…"
            _print_error(ConfigError(f"{short}: the path is too long for this system ({err.strerror})"))
            raise typer.Exit(ConfigError.exit_code) from None


class _App(typer.Typer):
    """The last guard: a wrong flag is one line on stderr and exit 2, an unexpected exception one
    line and exit 1, never a box or a traceback (``SPECBENCH_DEBUG=1`` shows it)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            # not standalone: click's usage errors come back here to be printed as one line
            result = super().__call__(*args, **{**kwargs, "standalone_mode": False})
        except click.exceptions.NoArgsIsHelpError as exc:
            exc.show()  # the help text itself, as `specbench lab` with no command asks for
            sys.exit(exc.exit_code)
        except click.exceptions.UsageError as exc:
            where = f"; see `{exc.ctx.command_path} --help`" if exc.ctx else ""
            text = exc.format_message().replace("\n", " ").rstrip(".")
            print(f"error: {text}{where}", file=sys.stderr)
            sys.exit(exc.exit_code)
        except click.exceptions.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except typer.Abort:
            sys.exit(1)
        except KeyboardInterrupt:  # one landing outside a command's own handler: still 130
            _exit_interrupted()
        except Exception as exc:
            if os.environ.get("SPECBENCH_DEBUG"):
                raise
            text = printable(f"{type(exc).__name__}: {exc}".replace("\n", " ")[:500], markup=False)
            print(f"error: internal error ({text}); SPECBENCH_DEBUG=1 shows the traceback", file=sys.stderr)
            sys.exit(1)
        # non-standalone click returns a typer.Exit's code instead of exiting with it
        if result == 130:
            _exit_interrupted()
        sys.exit(result if isinstance(result, int) else 0)


app = _App(
    cls=_Boundary,
    # plain help: rich's renders "[ray]" as markup (it vanished) and shows <bool> beside flags
    rich_markup_mode=None,
    no_args_is_help=True,
    add_completion=False,
    help="Benchmark speculative decoding on llama.cpp, vLLM and SGLang, with evidence.",
    epilog=EXIT_CODES,
)


def _print_error(err: SpecbenchError) -> None:
    # soft_wrap: a path is never broken across lines when stderr is a pipe or a file
    text = printable(str(err).replace("\n", " "))  # one line; "[...]" and escapes are text
    console.print(f"[red]error:[/red] {text}", markup=True, highlight=False, soft_wrap=True)
    if isinstance(err, YamlSyntaxError) and err.snippet:  # the caret needs its own lines
        lines = err.snippet.rstrip("\n").split("\n")  # escaped line by line: the caret keeps its line
        console.print(
            "\n".join(printable(ln, markup=False) for ln in lines),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def _exit_interrupted() -> NoReturn:
    """Exit 130 once an interrupt has been handled. The signal may also have tripped Python's
    flag from another thread (the record writer's, asyncio's), to be acted on during interpreter
    shutdown, where a second KeyboardInterrupt kills the process with SIGINT (-2) instead of 130:
    the run is already stopping, so further interrupts are ignored from here on."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    sys.exit(130)


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # same clean-up path as Ctrl-C: stop engines, keep records


def interrupt_on_signals() -> None:
    """SIGTERM and SIGHUP (a closed terminal, a dropped SSH session) act like Ctrl-C."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _sigterm_as_interrupt)


def main() -> None:  # pragma: no cover - console entry
    sys.exit(app())
