"""One exception tree for gpuplace; each class carries the exit code the CLI returns.

Exit codes (click's convention, shared by nvidia-smi-style tools): 0 success, 1 a runtime
failure (out of memory, a failed check, a placement this machine cannot satisfy), 2 bad input.

A message names the caller's settings as data, not text: a `Message` holds `Setting` and `Term`
parts among its strings, and each caller says them in its own `Words`. `str(error)` is the
Python API's (`Options.memory_fraction=1.5`); the CLI renders the same error with its flags
(`--memory-fraction 1.5`, `gpuplace/cli/words.py`), as click's `BadParameter` keeps its
parameter as data until `format_message`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import ClassVar, NamedTuple

from .echo import TEXT_CHARS, fit_line, show


class Setting(NamedTuple):
    """One of the caller's settings, by its `Options` field: alone (`Options.memory_limit`,
    `--memory-limit`), with the `value` given (`Options.memory_limit='64MiB'`; None: no value),
    or one `key` of a mapping (`Options.feeds['x']`, `--feed x`). `quote`: the CLI shows the
    value as Python would (`--replicate 'abc'`), as the API always does."""

    field: str
    value: object = None
    key: str | None = None
    quote: bool = False


class Term(Enum):
    """A phrase that is not one setting and that each caller says in its own words."""

    SOFT_PLACEMENT = "the setting that lets TensorFlow relax a device request"
    MACHINE = "where a machine to plan for comes from"
    RUN_ANYWAY = "how to run a graph whose OOM was predicted"
    FEED_EACH = "how to give each placeholder a value"
    REPLICATE_AGAIN = "the replicate setting, when the spec has its own replicate: block"
    COMPARE = "running a graph under several memory policies side by side"
    PLAN = "where each device's predicted memory is shown"
    CLUSTER = "where the tasks of a cluster come from"


Part = str | Setting | Term


class Message:
    """Text with references: strings as they are, Setting and Term parts said by a `Words`
    (as rich's `Text.assemble` joins styled parts); `str()` gives the Python API's words.

    Immutable, compared and hashed by its parts. A plain class: a dataclass would run its
    generated methods through `exec` at every start-up (~4M instructions: issue 17)."""

    __slots__ = ("parts",)
    parts: tuple[Part, ...]

    def __init__(self, *parts: Part) -> None:
        object.__setattr__(self, "parts", parts)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Message cannot change: cannot assign to {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not Message:
            return NotImplemented
        return other.parts == self.parts

    def __hash__(self) -> int:
        return hash(self.parts)

    def __repr__(self) -> str:
        return f"Message(parts={self.parts!r})"

    def __reduce__(self) -> tuple[type[Message], tuple[Part, ...]]:
        """Pickled as its parts (an error crossing to a Dask worker and back)."""
        return Message, self.parts

    def __str__(self) -> str:
        """The Python API's words (an f-string bakes them in: say a Message with `Words.say`)."""
        return API.say(self)


Text = str | Message  # what errors, fixes and warnings hold: plain text, or text with references


class Words:
    """How a caller names settings and terms; this class speaks for the Python API
    (`Options.memory_fraction=1.5`, `Options.feeds['x']`). The CLI's flags subclass it."""

    terms: ClassVar[Mapping[Term, str]] = {
        Term.SOFT_PLACEMENT: "Options(allow_soft_placement=True)",
        Term.MACHINE: "gpuplace.discover(machine_spec)",
        Term.RUN_ANYWAY: "gpuplace.execute_prepared(prepared, view) runs it anyway",
        Term.FEED_EACH: "give each a value in Options.feeds: a .npy path, JSON text or an array",
        Term.REPLICATE_AGAIN: "Options.replicate",
        Term.COMPARE: "compare_policies",
        Term.PLAN: "gpuplace.predict_memory(prepared, view)",
        Term.CLUSTER: "a cluster: block in the spec",
    }

    def setting(self, ref: Setting) -> str:
        """`Options.memory_limit`, `Options.memory_limit='64MiB'`, `Options.feeds['x']='[1]'`."""
        name = f"Options.{ref.field}" + ("" if ref.key is None else f"[{show(ref.key)}]")
        return name if ref.value is None else f"{name}={show(ref.value, TEXT_CHARS)}"

    def word(self, part: Part) -> str:
        """One part in these words."""
        if isinstance(part, Setting):
            return self.setting(part)
        return self.terms[part] if isinstance(part, Term) else part

    def say(self, text: Text) -> str:
        """A whole message in these words."""
        return text if isinstance(text, str) else "".join(map(self.word, text.parts))


API = Words()


class GpuplaceError(Exception):
    """Base class: a message meant for the user, naming what, where and the fix.

    `message` and `fix` (None where the message has no separate fix) are Text; the line a user
    reads is the message, `joint`, then the fix. `setting` and `value` are the setting the
    message starts with, when it starts with one (`Options.memory_fraction=1.5: ...`)."""

    exit_code = 1

    def __init__(self, message: Text, fix: Text | None = None, joint: str = " Fix: ") -> None:
        super().__init__(message)
        self.message, self.fix, self.joint = message, fix, joint

    @property
    def setting(self) -> Setting | None:
        """The setting the message is about (its first part), for tools that act on it."""
        parts = self.message.parts if isinstance(self.message, Message) else ()
        return parts[0] if parts and isinstance(parts[0], Setting) else None

    @property
    def value(self) -> object:
        """The value the caller gave that setting (None: no setting, or none given)."""
        return None if self.setting is None else self.setting.value

    def render(self, words: Words) -> str:
        """The whole line in `words` (the Python API's, or the CLI's), within one screen."""
        text = words.say(self.message)
        return fit_line(text if self.fix is None else f"{text}{self.joint}{words.say(self.fix)}")

    def __str__(self) -> str:
        """The Python API's words: what a caller of `gpuplace.prepare` reads."""
        return self.render(API)

    def __reduce__(self) -> tuple[object, ...]:
        """Pickle every field, whatever the subclass's `__init__` takes: errors raised in a
        cluster's worker process arrive at the client as the same error."""
        return (_rebuilt, (type(self), self.args, self.__dict__))


def _rebuilt(
    cls: type[GpuplaceError], args: tuple[object, ...], state: dict[str, object]
) -> GpuplaceError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class BadInput(GpuplaceError):
    """The user gave something gpuplace cannot accept (flag value, spec, machine file): exit 2."""

    exit_code = 2


class RuntimeFailure(GpuplaceError):
    """Valid input, but this machine or run failed it (out of memory, failed check): exit 1."""

    exit_code = 1


class CheckFailed(RuntimeFailure):
    """A CI smoke check (`--require-gpus`, `--min-memory`, `--check`) did not pass."""


class MissingDependency(RuntimeFailure):
    """An optional library (cupy, nvidia-ml-py) is needed for this and is not installed."""


class OutputError(RuntimeFailure):
    """Standard output could not be written (disk full, closed, the reader went away): exit 1."""

    def __init__(self, reason: str, errno: int | None = None) -> None:
        super().__init__(f"cannot write output: {reason}")
        self.errno = errno
