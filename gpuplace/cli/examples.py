"""`gpuplace examples [DIR]`: copy the example specs that ship with gpuplace into a folder, so a
pip user has the files every example in the docs names."""

from __future__ import annotations

import shlex

import click

from .context import AppContext


@click.command()
@click.argument("folder", metavar="DIR", default="gpuplace-examples")
@click.option("--force", is_flag=True, help="Replace files that differ from the bundled ones.")
@click.pass_obj
def examples(app: AppContext, /, folder: str, force: bool) -> None:
    """Copy the bundled example graphs into DIR (default: ./gpuplace-examples).

    \b
    Example:
      gpuplace examples && gpuplace run gpuplace-examples/guide/02_manual_placement.yaml
    """
    from ..bundled import copy_examples

    done = copy_examples(folder, replace=force)
    shown = shlex.quote(folder)
    total = len(done.written) + len(done.unchanged)
    said = (
        f"wrote {len(done.written)} of the {total} example files to {shown}"
        if done.written
        else f"{shown} already holds the {total} example files"
    )
    click.echo(f"{said}; try: gpuplace run {shown}/guide/02_manual_placement.yaml --explain")
