"""`python -m gpuplace`."""

from .cli import entry

entry()
