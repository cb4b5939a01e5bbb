"""`make gpu-check`: run the real-GPU suite and print one summary table (test, outcome, seconds)."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest


class Collect:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, float, str]] = []

    def pytest_runtest_logreport(self, report: Any) -> None:
        if (
            report.when == "call"
            or (report.when == "setup" and report.outcome != "passed")
            or (report.when == "teardown" and report.failed)
        ):
            reason = ""
            if report.skipped and isinstance(report.longrepr, tuple):
                reason = str(report.longrepr[2])
            elif report.failed:
                reason = str(report.longrepr).strip().splitlines()[-1][:100]
            self.rows.append(
                (
                    report.nodeid.split("::", 1)[-1]
                    + (" (teardown)" if report.when == "teardown" else ""),
                    report.outcome,
                    report.duration,
                    reason,
                )
            )


def main() -> int:
    collect = Collect()
    start = time.perf_counter()
    code = pytest.main(
        [
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "-o",
            "faulthandler_timeout=150",
            "-m",
            "gpu",
            "tests/gpu",
        ],  # a hung test dumps its stack after 150 s
        plugins=[collect],
    )
    width = max((len(r[0]) for r in collect.rows), default=4)
    print("\n== gpu-check summary")
    print(f"{'TEST':<{width}}  {'RESULT':<7}  {'SECONDS':>7}  DETAIL")
    for name, outcome, seconds, reason in collect.rows:
        print(f"{name:<{width}}  {outcome:<7}  {seconds:>7.2f}  {reason}")
    passed = sum(r[1] == "passed" for r in collect.rows)
    print(
        f"{passed}/{len(collect.rows)} passed in {time.perf_counter() - start:.1f} s (pytest exit {int(code)})"
    )
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
