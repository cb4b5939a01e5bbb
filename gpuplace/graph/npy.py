""".npy files, checked before they are read: the `load` op's file (when the spec is loaded, so
`plan` refuses what `run` would, and again at run time) and `--feed NAME=FILE.npy`.

numpy's reader trusts the header: a header that claims 10^12 elements makes `np.load` allocate
them before it finds the file short, and negative dimensions pass its header parser (a plan
once printed shape [-4,-4], -20 B). Here the header is read alone, with numpy's parser and its
10,000-byte cap (no pickles, no evaluated Python); then its dtype, its dimensions (none
negative, at most 64) and the bytes it claims against the file's size, before any array is made.
Messages never quote a header whole.
"""

from __future__ import annotations

import os
import re
import stat
from math import prod
from tokenize import TokenError
from typing import TYPE_CHECKING, Any, NamedTuple

from ..echo import clip_middle
from ..limits import MAX_RANK

if TYPE_CHECKING:
    import numpy as np


class NpyError(ValueError):
    """What is wrong with a .npy file, in words that follow `cannot read it as a .npy file: `."""


class NpyHeader(NamedTuple):
    """A checked .npy header: the array's shape and dtype, and the bytes of data it claims."""

    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    nbytes: int


def read_header(path: str) -> NpyHeader:
    """The header of the .npy file at `path`, checked against the file; NpyError otherwise."""
    from numpy.lib import format as npy

    try:
        with open(path, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise NpyError("it is not a regular file")
            version = npy.read_magic(f)
            if version not in ((1, 0), (2, 0)):
                raise NpyError(
                    f"format version {version[0]}.{version[1]} is not read here (1.0, 2.0)"
                )
            read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
            shape, _, dtype = read(f)
            have = info.st_size - f.tell()
    except OSError as err:
        raise NpyError(err.strerror or str(err)) from None
    except NpyError:
        raise
    except ValueError as err:  # a bad magic string, an oversized or malformed header
        raise NpyError(_numpy_words(str(err))) from None
    except (SyntaxError, TokenError, RecursionError):  # numpy's parser tokenizes the header
        raise NpyError("its header is not the dictionary numpy writes") from None
    return _checked(tuple(shape), dtype, have)


def _checked(shape: tuple[int, ...], dtype: np.dtype[Any], have: int) -> NpyHeader:
    if dtype.hasobject:
        raise NpyError("it holds Python objects (a pickle), which gpuplace never loads")
    if len(shape) > MAX_RANK:
        raise NpyError(f"its header gives {len(shape)} dimensions; numpy arrays have at most 64")
    if any(d < 0 for d in shape):
        raise NpyError(f"its header gives negative dimensions {_dims(shape)}")
    need = prod(shape) * dtype.itemsize
    if have < need:
        raise NpyError(
            f"it is truncated: its header says {dtype} {_dims(shape)}, {need:,} bytes of data, "
            f"but it holds {have:,}"
        )
    return NpyHeader(shape, dtype, need)


def _numpy_words(text: str) -> str:
    """numpy's reason, on one short line (its oversized-header warning is a paragraph)."""
    large = re.match(r"Header info length \((\d+)\) is large", text)
    if large:
        return f"its header is {int(large[1]):,} bytes, more than the 10,000 numpy reads"
    return clip_middle(" ".join(text.split()), 160)


def _dims(shape: tuple[int, ...]) -> str:
    return clip_middle(f"[{','.join(map(str, shape))}]")
