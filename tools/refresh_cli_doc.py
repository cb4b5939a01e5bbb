"""Rewrite the `--help` blocks of docs/cli.md with what gpuplace prints now.

tests/test_docs.py runs every `$ gpuplace ... --help` block there and fails when a flag changed;
run `python tools/refresh_cli_doc.py` (with the venv's python) and review the diff.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
BLOCK = re.compile(r"(```console\n\$ (gpuplace [^\n]*--help)\n)(.*?)(```)", re.S)


def main() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "GPUPLACE_"))}
    env.pop("COLUMNS", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"

    def fresh(m: re.Match[str]) -> str:
        done = subprocess.run(["bash", "-c", m.group(2)], env=env, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, check=True)  # fmt: skip
        return f"{m.group(1)}{done.stdout.rstrip()}\n{m.group(4)}"

    DOC.write_text(BLOCK.sub(fresh, DOC.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main()
