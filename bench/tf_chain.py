"""TensorFlow 1's C++ executor on bench_execute's chain, run by an interpreter that has tensorflow.

`python tf_chain.py N REPEATS` builds a graph-mode chain of N `tf.add`s of one 2x2 float32 constant
(as bench_execute.py's chain_graph), opens a Session with Grappler (the meta optimizer, constant
folding) and the classic graph optimizer (L0, no constant folding) off, on one thread, runs it once
(graph set-up: the executor is built then), then times REPEATS warm `Session.run`s, each beside a
plain Python loop of the same numpy adds in this process; all in CPU time, as bench_execute.py.
Prints one JSON line (bench_execute.py sets TF_CPP_MIN_LOG_LEVEL=3 to keep TensorFlow's start-up
logs off stderr).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2


def main(n: int, repeats: int) -> None:
    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
    c_value = np.ones((2, 2), np.float32)
    start = time.process_time()
    graph = tf1.Graph()
    with graph.as_default():
        c = tf1.constant(c_value)
        x = tf.add(c, c)
        for _ in range(n - 1):
            x = tf.add(x, c)
    build = time.process_time() - start
    config = config_pb2.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    config.graph_options.optimizer_options.opt_level = config_pb2.OptimizerOptions.L0
    config.graph_options.optimizer_options.do_constant_folding = False
    rewrite = config.graph_options.rewrite_options
    rewrite.disable_meta_optimizer = True
    rewrite.constant_folding = rewriter_config_pb2.RewriterConfig.OFF

    def plain() -> None:
        y = np.add(c_value, c_value)
        for _ in range(n - 1):
            y = np.add(y, c_value)

    with tf1.Session(graph=graph, config=config) as session:
        start = time.process_time()
        value = session.run(x)
        first = time.process_time() - start
        runs, loops = [], []
        for _ in range(repeats):
            start = time.process_time()
            session.run(x)
            runs.append(time.process_time() - start)
            start = time.process_time()
            plain()
            loops.append(time.process_time() - start)
    print(
        json.dumps(
            {
                "version": tf.__version__,
                "build": build,
                "first": first,
                "run": min(runs),
                "loop": min(loops),
                "value": value.tolist(),
            }
        )
    )


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
