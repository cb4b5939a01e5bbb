"""`--help` as users read it: options grouped by what they are for, and examples that tests run.

Every command uses `Command`: its options print under the sections below (by parameter name;
anything not listed, such as --machine, --debug and --help, goes last under "Other options"),
and its `examples` print after them. tests/test_cli_help.py runs every example line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

SECTIONS: tuple[tuple[str, frozenset[str]], ...] = (
    ("Output",
     frozenset({"log", "log_format", "explain", "as_json", "fmt", "save", "output", "wide"})),
    ("Watching", frozenset({"watch", "count"})),
    ("Placement", frozenset({"soft", "strategy", "replicate", "device_map"})),
    ("ONNX models", frozenset({"dims"})),
    ("Running", frozenset({"feed", "verify", "force", "compare"})),
    ("Memory policy (TensorFlow's gpu_options)",
     frozenset({"allow_growth", "memory_fraction", "memory_limit", "virtual_gpus",
                "max_memory"})),
    ("Training step", frozenset({"training", "training_dtype"})),
    ("Checks", frozenset({"require_gpus", "min_memory", "check", "presets"})),
    ("Files the spec writes", frozenset({"out_dir", "allow_writes_anywhere"})),
)  # fmt: skip


class Command(click.Command):
    """A click command whose help groups its options (SECTIONS) and ends with examples."""

    def __init__(self, *args: Any, examples: Sequence[str] = (), **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.examples = tuple(examples)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        groups: dict[str, list[tuple[str, str]]] = {title: [] for title, _ in SECTIONS}
        other: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = None if isinstance(param, click.Argument) else param.get_help_record(ctx)
            if record is None:
                continue
            title = next((t for t, names in SECTIONS if param.name in names), None)
            (other if title is None else groups[title]).append(record)
        shown = [(title, records) for title, records in groups.items() if records]
        shown.append(("Other options" if shown else "Options", other))
        for title, records in shown:
            with formatter.section(title):
                formatter.write_dl(records)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.examples:
            with formatter.section("Examples"):
                for line in self.examples:  # whole, never re-wrapped: users copy them
                    formatter.write(f"{'':>{formatter.current_indent}}{line}\n")
        super().format_epilog(ctx, formatter)
