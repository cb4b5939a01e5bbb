"""Big outputs on a terminal: `gpuplace plan SPEC` and `gpuplace run SPEC --explain` with stdout a
pseudo-terminal (200 x 50, read to its end as a terminal would) against the same command piped,
whole processes, in one run: `python bench/bench_terminal.py [N] [--smoke]`.

Goal (issue 17, for N = 100,000 ops): each at most 1.5x piped (it was 46.6 s against 2.5 s for
plan: rich laid the whole table out before printing its first row). Since then a table past
`cli/output.py: TABLE_ROWS` rows prints the plain layout a pipe gets. The spec is the layered
chain (bench/procs.py); best of RUNS, piped and terminal in turn. `--smoke`: 2,000 ops, one run
(past TABLE_ROWS, so the long-table path is the one timed).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from procs import GPUPLACE, size, smoke, to_pipe, to_terminal, verdict, write_shape

FULL = 100_000


def main() -> None:
    n = size(FULL, 2_000)
    runs = 1 if smoke() else 2
    print(f"{n:,}-op chain on 4xK520, best of {runs}: a 200x50 pseudo-terminal vs a pipe")
    with tempfile.TemporaryDirectory() as tmp:
        _, spec = write_shape("chain", n, Path(tmp))
        for args in (["plan"], ["run", "--explain"]):
            cmd = [*GPUPLACE, "--machine", "4xK520", args[0], str(spec), *args[1:]]
            piped, tty = [], []
            for _ in range(runs):
                piped.append(to_pipe(cmd))
                tty.append(to_terminal(cmd))
            ratio = min(tty) / min(piped)
            print(f"{' '.join(args)}: terminal {min(tty):.2f} s, piped {min(piped):.2f} s, "
                  f"ratio {ratio:.2f} ({verdict(ratio, 1.5, n, FULL)})")  # fmt: skip


if __name__ == "__main__":
    main()
