"""Shared by the capture scripts: run a tf.compat.v1 graph in a Session with
log_device_placement and read TensorFlow's placement lines (printed by the C++ placer with
printf, so they are read from file descriptor 1, flushed with libc's fflush).

Run with the TensorFlow CPU build only (`/work/tfenv-cpu/bin/python`); never imported by
gpuplace or its tests.
"""

from __future__ import annotations

import ctypes
import os
import re
import tempfile
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf

tf.compat.v1.disable_eager_execution()
_LIBC = ctypes.CDLL(None)
_LINE = re.compile(r"^(?P<name>[^:]+): \((?P<type>[^)]+)\): (?P<device>/\S+)$")


def run_logged(
    graph: Any,
    fetches: list[Any],
    soft: bool = False,
    cpus: int = 1,
    setup: Any = None,
    target: str = "",
) -> dict[str, Any]:
    """Run `fetches` of `graph` in a session with `cpus` CPU devices (ConfigProto's
    device_count: a tf.compat.v1.Session makes its own devices), after `setup` (e.g. the
    variables' initializer) if given; return {"placed": {name: [type, device]}, "order": [...]} or
    {"error": first line of TF's message after the node header}. `target`: a server's
    (`tf.distribute.Server.target`), for a session on a cluster's task."""
    config = tf.compat.v1.ConfigProto(
        log_device_placement=True, allow_soft_placement=soft, device_count={"CPU": cpus}
    )
    with tempfile.TemporaryFile(mode="w+b") as out:
        saved = os.dup(1)
        _LIBC.fflush(None)
        os.dup2(out.fileno(), 1)
        error: str | None = None
        try:
            with tf.compat.v1.Session(target, graph=graph, config=config) as sess:
                if setup is not None:
                    sess.run(setup)
                sess.run(fetches)
        except tf.errors.OpError as err:
            error = tf_message(err.message)
        finally:
            _LIBC.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
        out.seek(0)
        text = out.read().decode()
    if error is not None:
        return {"error": error}
    placed: dict[str, list[str]] = {}
    order: list[str] = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            placed[m["name"]] = [m["type"], m["device"]]
            order.append(m["name"])
    return {"placed": placed, "order": order}


def tf_message(message: str) -> str:
    """TF's own message from a Session error: the text after `Node: 'x'` (the Python traceback
    part, `Detected at node ...`, is dropped), without the trailing `\\t [[x]]` lines."""
    if "\nNode: " in message:
        message = message.split("\nNode: ", 1)[1].split("\n", 1)[1]
    return message.split("\n\t [[", 1)[0].rstrip("\n")
