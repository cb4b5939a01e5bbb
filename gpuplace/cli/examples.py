"""`gpuplace examples [DIR]`: copy the example specs that ship with gpuplace into a folder, so a
pip user has the files every example in the docs names."""

from __future__ import annotations

import shlex

import click

from .context import AppContext
from .help import Command


@click.command(
    cls=Command,
    short_help="Copy the bundled example graphs into a folder",
    examples=["gpuplace examples gpuplace-examples"],
)  # fmt: skip
@click.argument("folder", metavar="[DIR]", default="gpuplace-examples")
@click.option(
    "--force", "replace", is_flag=True, help="Replace files that differ from the bundled ones."
)
@click.pass_obj
def examples(app: AppContext, /, folder: str, replace: bool) -> None:
    """Copy the bundled example graphs into DIR (default: ./gpuplace-examples), so that the
    examples in the docs work from a pip install."""
    from ..bundled import copy_examples

    done = copy_examples(folder, replace=replace)
    shown = shlex.quote(folder)
    total = len(done.written) + len(done.unchanged)
    said = (
        f"wrote {len(done.written)} of the {total} example files to {shown}"
        if done.written
        else f"{shown} already holds the {total} example files"
    )
    click.echo(f"{said}; try: gpuplace run {shown}/guide/02_manual_placement.yaml --explain")
