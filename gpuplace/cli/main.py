"""The `gpuplace` command line: the group, its commands (named here, one module each, imported
when the command runs or `--help` lists it), and the entry point that maps gpuplace's errors to
one line and an exit code. Commands parse flags, call the library and print; nothing below
`cli/` prints.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import io
import os
import re
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO, cast

import click

from ..echo import fit_line
from ..errors import GpuplaceError, OutputError
from ..report.schema import SCHEMA_VERSION
from .context import AppContext
from .flags import CLUSTER_HELP, DEBUG_HELP, MACHINE_HELP
from .interrupt import interrupted
from .output import say
from .words import CLI

# each the function of the same name in cli/NAME.py
COMMANDS = ("devices", "examples", "mem", "plan", "run", "worker")


class _Commands(click.Group):
    """The group, importing a command's module only when it is needed: `gpuplace run` does not
    load what `devices`, `mem` and `plan` print with (start-up is most of a small command)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *super().list_commands(ctx)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            module = importlib.import_module(f"{__package__}.{cmd_name}")
            self.add_command(getattr(module, cmd_name))
        return super().get_command(ctx, cmd_name)


def _version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """`gpuplace, version 0.1.0` and a line on the compiled core (gpuplace/compiled.py)."""
    if not value or ctx.resilient_parsing:
        return
    import os

    from .. import __version__
    from ..compiled import PURE_ENV, pure_requested, running
    from ..echo import TEXT_CHARS, clip, show

    compiled, total = running()
    if compiled == total:
        core = f"compiled core: on ({total} modules compiled with Cython)"
    elif pure_requested():
        said = os.environ[PURE_ENV]  # as written, unless it needs quoting (a newline)
        said = clip(said, TEXT_CHARS) if said.isprintable() else show(said, TEXT_CHARS)
        core = f"compiled core: off ({PURE_ENV}={said}: running them as Python)"
    else:
        core = f"compiled core: {compiled} of {total} modules compiled; the rest run as Python"
    click.echo(f"gpuplace, version {__version__}\n{core}")
    ctx.exit()


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--machine", "machine_spec", metavar="SPEC", help=MACHINE_HELP)
@click.option("--cluster", "cluster_spec", metavar="SPEC", help=CLUSTER_HELP)
@click.option("--debug", is_flag=True, help=DEBUG_HELP)
@click.option(
    "--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
    help="Show the version, and whether the compiled core runs, and exit.",
)  # fmt: skip
@click.pass_context
def cli(
    ctx: click.Context, machine_spec: str | None, cluster_spec: str | None, debug: bool
) -> None:
    """See the GPUs a CUDA program would see, and place work on them the way TensorFlow does."""
    app = ctx.ensure_object(AppContext)
    if machine_spec is not None:
        app.machine_spec = machine_spec
        ctx.meta["gpuplace.machine"] = machine_spec
    if cluster_spec is not None:
        app.cluster_spec = cluster_spec
        ctx.meta["gpuplace.cluster"] = cluster_spec
    app.debug = app.debug or debug


@contextlib.contextmanager
def _guarded() -> Iterator[None]:
    """A write failure on stdout as OutputError (a full disk, a closed descriptor, a reader
    that went away; ValueError: I/O operation on a closed file)."""
    try:
        yield
    except OSError as exc:
        raise OutputError(exc.strerror or str(exc), exc.errno) from exc
    except ValueError as exc:
        raise OutputError(str(exc)) from exc


class _GuardedStdout:
    """sys.stdout, with its write failures raised as OutputError, so that a full disk, a closed
    descriptor or a reader that went away is told apart from other OSErrors and gets one line."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.wrote = False  # anything yet: an error then has no JSON document of its own

    def write(self, text: str) -> int:
        self.wrote = self.wrote or bool(text)
        with _guarded():
            return self._stream.write(text)

    def flush(self) -> None:
        with _guarded():
            self._stream.flush()

    def write_bytes(self, chunks: Iterable[bytes]) -> None:
        """ASCII `chunks` (a JSON document) after what was written as text: straight to the
        stream's binary buffer when it has one, each as it comes (no decode and encode of
        45 MB, and no joining of them first), else as text."""
        buffer = getattr(self._stream, "buffer", None)
        if buffer is None:
            self.write("".join(chunk.decode("ascii") for chunk in chunks))
            return
        self.flush()
        for chunk in chunks:
            self.wrote = self.wrote or bool(chunk)
            with _guarded():
                buffer.write(chunk)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: list[str] | None = None, app: AppContext | None = None) -> int:
    """Run the group: map gpuplace errors to one message and an exit code (with --debug, the
    traceback too; the exit code stays the error's), and a SIGINT to `error: interrupted`, 130."""
    app = app or AppContext()
    app.json_errors = app.json_errors or _asks_json(sys.argv[1:] if argv is None else argv)
    stdout = sys.stdout
    if stdout is None:
        return _report(app, OutputError("standard output is closed"))
    sys.stdout = cast(TextIO, _GuardedStdout(stdout))
    try:
        code = _invoke(argv, app)
        sys.stdout.flush()
    except GpuplaceError as exc:
        return _report(app, exc)
    except KeyboardInterrupt as exc:  # outside click's handling (flushing, reporting)
        return interrupted(exc, app.debug)
    finally:
        sys.stdout = stdout
    return code


def _invoke(argv: list[str] | None, app: AppContext) -> int:
    try:
        cli.main(args=argv, obj=app, standalone_mode=False, prog_name="gpuplace")
    except click.ClickException as exc:
        shown = io.StringIO()
        exc.show(file=shown)  # click quotes a flag's value whole: 5,000 digits, one screen each
        for line in shown.getvalue().splitlines():  # one prefix for every error: gpuplace's
            say(fit_line("error: " + line[7:] if line.startswith("Error: ") else line))
        _json_error(app, "usage", fit_line(exc.format_message()), None, exc.exit_code)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort as exc:  # click's word for a KeyboardInterrupt (it printed a new line)
        return interrupted(exc.__cause__, app.debug, new_line=False)
    return 0


def _report(app: AppContext, exc: GpuplaceError) -> int:
    if isinstance(exc, OutputError) and exc.errno == errno.EPIPE:
        return 1  # the reader went away (`| head`): nothing to say, as cat and grep
    if app.debug:
        import traceback  # only here: it costs `devices` a few ms to import

        shown = "".join(traceback.format_exception(exc)).rstrip("\n")
        before, api, after = shown.rpartition(str(exc))  # its last line in the CLI's words too
        say(f"{before}{exc.render(CLI) if api else ''}{after}")
    say(f"error: {exc.render(CLI)}")
    if not isinstance(exc, OutputError):
        fix = None if exc.fix is None else CLI.say(exc.fix)
        kind = re.sub(r"(?<!^)(?=[A-Z])", "_", type(exc).__name__).lower()
        _json_error(app, kind, fit_line(CLI.say(exc.message)), fix, exc.exit_code)
    return exc.exit_code


def _asks_json(args: list[str]) -> bool:
    """Whether the command line asks for JSON (`--json`, `--format json`) before any `--`."""
    for i, arg in enumerate(args):
        if arg == "--":
            return False
        if arg in ("--json", "--format=json") or (
            arg == "--format" and args[i + 1 : i + 2] == ["json"]
        ):
            return True
    return False


def _json_error(app: AppContext, kind: str, message: str, fix: str | None, code: int) -> None:
    """Under --json, the error as a JSON document on stdout too (the line stays on stderr),
    unless the command already wrote its document there."""
    out = sys.stdout
    if not app.json_errors or not isinstance(out, _GuardedStdout) or out.wrote:
        return
    import json

    doc = {"schema_version": SCHEMA_VERSION,
           "error": {"kind": kind, "message": message, "fix": fix, "exit_code": code}}  # fmt: skip
    with contextlib.suppress(OutputError):
        out.write(json.dumps(doc, indent=2) + "\n")


_CONSOLE: list[AppContext] = []  # the console script's context, alive until the process ends


def run_console() -> int:  # pragma: no cover - the console script's; tests run it in a subprocess
    """`main` for the console script (`gpuplace.cli.entry`): its exit code, with stdout flushed.
    Its context keeps what the command printed until the process ends (`AppContext.kept`)."""
    _CONSOLE.append(AppContext(kept=[]))
    code = main(app=_CONSOLE[0])
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError):  # already reported: let the interpreter's last flush go nowhere
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code
