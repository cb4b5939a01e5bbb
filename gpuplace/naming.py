"""How messages name the settings a caller gave: `gpuplace run`'s flags, or the Python API's
`Options` fields.

One check serves both callers (`--memory-fraction 1.5` on the command line,
`Options(memory_fraction=1.5)` from Python), and each should read the name it wrote.
`Options.naming` carries the caller's naming down to the checks: `API` by default, `CLI` where the
commands build their Options. Imports nothing, so every layer may use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The flags gpuplace's own fix sentences name, as the Python API spells them
_API_WORDS = {
    "--allow-soft-placement": "Options(allow_soft_placement=True)",
    "--memory-limit": "Options.memory_limit",
    "--memory-fraction": "Options.memory_fraction",
    "--machine": "gpuplace.discover(machine_spec)",
}
_FLAG = re.compile("|".join(rf"{re.escape(flag)}(?![\w-])" for flag in _API_WORDS))
# Options fields whose flag is not `--` and the field's name with dashes
_FLAGS = {"log_device_placement": "--log-placement", "feeds": "--feed"}


@dataclass(frozen=True)
class Naming:
    """`cli`: the commands' flags (`--memory-fraction 1.5`); else the Python API's Options
    fields (`Options.memory_fraction=1.5`)."""

    cli: bool

    def name(self, setting: str) -> str:
        """An Options field as this caller names it: `--memory-fraction` or
        `Options.memory_fraction`."""
        if self.cli:
            return _FLAGS.get(setting, "--" + setting.replace("_", "-"))
        return f"Options.{setting}"

    def given(self, setting: str, value: object, quote: bool = False) -> str:
        """A setting with its value, as this caller writes it: `--memory-limit 64MiB` (with
        `quote`, `--memory-limit '64MiB'`; a bool is the flag alone, `--allow-growth` or
        `--no-allow-growth`) / `Options.memory_limit='64MiB'`."""
        if not self.cli:
            return f"Options.{setting}={value!r}"
        flag = self.name(setting)
        if isinstance(value, bool):
            return flag if value else f"--no-{flag[2:]}"
        return f"{flag} {value!r}" if quote else f"{flag} {value}"

    def feed(self, name: str, value: object = None) -> str:
        """One placeholder's feed: `--feed x=[1,2]` / `Options.feeds['x']='[1,2]'`; without a
        value, the feed itself: `--feed x` / `Options.feeds['x']`."""
        if self.cli:
            return f"--feed {name}" + ("" if value is None else f"={value}")
        return f"Options.feeds[{name!r}]" + ("" if value is None else f"={value!r}")

    def words(self, text: str) -> str:
        """A sentence written with the CLI's flags (a placement error's fix), in these names."""
        return text if self.cli else _FLAG.sub(lambda m: _API_WORDS[m.group(0)], text)


CLI = Naming(cli=True)
API = Naming(cli=False)
