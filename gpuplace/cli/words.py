"""The CLI's words for the settings and terms in gpuplace's messages: the commands' flags
(`--memory-fraction 1.5`, `--feed x=[1]`, `--allow-soft-placement`, `--machine`), where the
Python API says `Options.memory_fraction=1.5` (`gpuplace.errors.Words`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..echo import TEXT_CHARS, clip, show
from ..errors import Setting, Term, Words

# Options fields whose flag is not `--` and the field's name with dashes
_FLAGS = {"log_device_placement": "--log-placement", "feeds": "--feed", "dims": "--dim",
          "training_dtype": "--dtype"}  # fmt: skip


class CliWords(Words):
    """Settings as `gpuplace run`'s flags: `--memory-limit 64MiB`, `--allow-growth` /
    `--no-allow-growth` for a bool, `--feed x=[1,2]` for one entry of Options.feeds."""

    terms: ClassVar[Mapping[Term, str]] = {
        Term.SOFT_PLACEMENT: "--allow-soft-placement",
        Term.MACHINE: "--machine",
        Term.RUN_ANYWAY: "pass --force to run anyway",
        Term.FEED_EACH: "pass --feed NAME=FILE.npy or --feed NAME=JSON for each",
        Term.REPLICATE_AGAIN: "the flag",
        Term.COMPARE: "--compare",
        Term.PLAN: "gpuplace plan",
        Term.CLUSTER: "--cluster (or a cluster: block in the spec)",
    }

    def setting(self, ref: Setting) -> str:
        flag = _FLAGS.get(ref.field, "--" + ref.field.replace("_", "-"))
        value = ref.value
        if ref.key is not None:
            return f"{flag} {clip(ref.key)}" + ("" if value is None else f"={_text(value)}")
        if value is None:
            return flag
        if isinstance(value, bool):
            return flag if value else f"--no-{flag[2:]}"
        return f"{flag} {show(value, TEXT_CHARS)}" if ref.quote else f"{flag} {_text(value)}"


def _text(value: object) -> str:
    """A flag's value as typed, cut short (--replicate with 5,000 digits)."""
    try:
        return clip(str(value), TEXT_CHARS)
    except ValueError:  # an int past the 4,300 digits str() takes
        return show(value)


CLI = CliWords()
