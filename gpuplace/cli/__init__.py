"""The `gpuplace` command line (see `main.py`); `AppContext` is what tests inject."""

from .context import AppContext
from .main import cli, main

__all__ = ["AppContext", "cli", "main"]
