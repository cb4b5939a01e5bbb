"""The CLI's words for the settings and terms in gpuplace's messages: the commands' flags
(`--memory-fraction 1.5`, `--feed x=[1]`, `--allow-soft-placement`, `--machine`), where the
Python API says `Options.memory_fraction=1.5` (`gpuplace.errors.Words`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..errors import Setting, Term, Words

# Options fields whose flag is not `--` and the field's name with dashes
_FLAGS = {"log_device_placement": "--log-placement", "feeds": "--feed"}


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
    }

    def setting(self, ref: Setting) -> str:
        flag = _FLAGS.get(ref.field, "--" + ref.field.replace("_", "-"))
        if ref.key is not None:
            return f"{flag} {ref.key}" + ("" if ref.value is None else f"={ref.value}")
        if ref.value is None:
            return flag
        if isinstance(ref.value, bool):
            return flag if ref.value else f"--no-{flag[2:]}"
        return f"{flag} {ref.value!r}" if ref.quote else f"{flag} {ref.value}"


CLI = CliWords()
