"""Where a spec may write: its `save` ops stay under one folder unless the caller allows more.

A spec is data people pass around, so by default a `save` path is relative and stays under the
spec's folder (or `out_dir`: Options.out_dir, `--out-dir`): an absolute path, `~`, a `..`
component, and a symbolic link on the way (a bundle that ships `out.npy -> ../victim.txt`) are
refused when the spec is loaded, before anything runs, so `plan` refuses what `run` would.
`allow_writes_anywhere` lifts the rule. Either way the path is stored absolute with its folder
resolved (`os.path.realpath`), so the `save` kernel can refuse a folder that became a link since
(`check_folder`); the write itself is atomic and replaces a link at the path rather than
writing through it (`fileio.write_atomic`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from typing import NamedTuple, NoReturn

from ..echo import show
from ..errors import BadInput, Message, Setting


class WriteRules(NamedTuple):
    """Where `save` paths start (`root`, absolute and resolved once) and whether they may leave
    it; `out_dir` is the folder as the caller gave it, when `root` came from it (messages name
    the setting)."""

    root: str
    anywhere: bool = False
    out_dir: str | None = None


def write_rules(
    base: str, out_dir: str | os.PathLike[str] | None = None, anywhere: bool = False
) -> WriteRules:
    """The rules for a spec whose folder is `base`: relative `save` paths start at `out_dir`
    when given (it must be a folder), else at `base`."""
    if out_dir is None:
        return WriteRules(os.path.realpath(base), anywhere)
    folder = os.fspath(out_dir)
    if not os.path.isdir(folder):
        raise BadInput(
            Message(
                Setting("out_dir", folder, quote=True),
                ": not a folder; create it first, or name one that exists",
            )
        )
    return WriteRules(os.path.realpath(folder), anywhere, folder)


def save_path(op_name: str, given: str, rules: WriteRules) -> str:
    """The absolute path op `op_name` (save) writes for the `path` the spec gave, with its
    folder resolved; BadInput naming the op, the path and the fix for one the rules refuse."""
    name = os.path.basename(given)
    if "\0" in given or name in ("", ".", ".."):
        why = "holds a NUL character" if "\0" in given else "names a folder, not a file"
        raise BadInput(
            f"op '{op_name}' (save): path {show(given, 120)} {why}; name a file, e.g. out.npy"
        )
    if rules.anywhere:
        folder = os.path.dirname(os.path.join(rules.root, os.path.expanduser(given)))
        path = os.path.join(os.path.realpath(folder), name)
    else:
        path = _inside(op_name, given, rules)
    if os.path.isdir(path):
        raise BadInput(
            f"op '{op_name}' (save): path {show(given, 120)} is a folder; name a file in it, "
            f"e.g. {show(os.path.join(given, 'out.npy'), 120)}"
        )
    return path


def _inside(op_name: str, given: str, rules: WriteRules) -> str:
    """`given` under the root, checked: relative, no `..`, no symbolic link on the way."""
    parts = [p for p in given.split(os.sep) if p not in ("", ".")]
    if given.startswith("~"):
        _refuse(op_name, given, "starts at a home folder ('~')", rules)
    if os.path.isabs(given):
        _refuse(op_name, given, "is absolute", rules)
    if ".." in parts:
        _refuse(op_name, given, "climbs out with '..'", rules)
    path = rules.root
    for k, part in enumerate(parts):
        path = os.path.join(path, part)
        try:
            mode = os.lstat(path).st_mode
        except OSError:  # not there yet (nor what follows), or not searchable: the write says
            break
        if stat.S_ISLNK(mode):
            shown = os.sep.join(parts[: k + 1])
            with contextlib.suppress(OSError):
                shown += f" -> {os.readlink(path)}"
            _refuse(op_name, given, f"goes through a symbolic link ({show(shown, 120)})", rules)
    return path


def _refuse(op_name: str, given: str, why: str, rules: WriteRules) -> NoReturn:
    where: tuple[str | Setting, ...] = (f"its folder {rules.root}",)
    if rules.out_dir is not None:
        where = (Setting("out_dir", rules.out_dir, quote=True),)
    raise BadInput(
        Message(
            f"op '{op_name}' (save): path {show(given, 120)} {why}; a spec writes only under ",
            *where, ", never through a symbolic link: give a plain relative path, choose the "
            "folder with ", Setting("out_dir"), ", or allow this with ",
            Setting("allow_writes_anywhere", True),
        )
    )  # fmt: skip


def check_folder(path: str) -> None:
    """OSError when the folder of `path`, resolved when the spec was loaded, is now reached
    through a symbolic link (swapped in since): the `save` kernel's last look before writing."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.realpath(folder) != folder:
        raise OSError(errno.ELOOP, "its folder is now reached through a symbolic link", path)
