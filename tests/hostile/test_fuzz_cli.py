"""The CLI fuzzer (issue #12): mutants of the examples/ specs and the README's specs and machine
file (see mutate.py), each run through `gpuplace` in a forked child under resource limits.

Every mutant must end with exit 0, 1 or 2, without a traceback, a hang or a kill (the first
test), and with messages as promised: at most a screen, a failure said in one `error:` line, no
Python exception leaked into it (the second). Failures of #12 that today's code still shows are
listed in KNOWN: the tests xfail on those alone and fail on any other.

`make test` runs 300 mutants, the same ones every time. GPUPLACE_FUZZ_EXAMPLES=5000 runs more;
GPUPLACE_FUZZ_SEED=N draws other ones; GPUPLACE_FUZZ_REPORT=FILE writes a summary and each
distinct failure there as JSON lines (the run goes on past the first failure).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from tests.hostile.cases import about_messages, broken_promise
from tests.hostile.mutate import Mutant, mutants, seeds
from tests.hostile.sandbox import ForkServer, Limits, Outcome, clean_env

EXAMPLES = int(os.environ.get("GPUPLACE_FUZZ_EXAMPLES", "300"))
SEED = os.environ.get("GPUPLACE_FUZZ_SEED")
REPORT = os.environ.get("GPUPLACE_FUZZ_REPORT")
LIMITS = Limits(cpu_s=20, wall_s=30.0)  # each mutant needs well under a second
# Failures of issue #12 that the default mutants find in today's code, by broken_promise's
# words: the tests xfail while these are all they find, and fail on any other. Remove an entry
# when its fix lands (the test then passes, or names what is left).
KNOWN: dict[str, str] = {}  # failure signature -> the issue being fixed (none open now)
# Both tests read one run of the mutants (a module fixture): one pytest-xdist worker runs them.
pytestmark = pytest.mark.xdist_group("hostile/test_fuzz_cli")


@dataclass
class Fuzzed:
    """What the mutants did: exit codes, peaks, and the first mutant of each distinct failure."""

    codes: Counter[str] = field(default_factory=Counter)
    peak_rss_kb: int = 0
    longest_s: float = 0.0
    findings: dict[str, tuple[Mutant, Outcome]] = field(default_factory=dict)
    times: Counter[str] = field(default_factory=Counter)  # mutants per finding

    def add(self, mutant: Mutant, outcome: Outcome) -> None:
        self.codes[str(outcome.code if outcome.signal is None else -outcome.signal)] += 1
        self.peak_rss_kb = max(self.peak_rss_kb, outcome.maxrss_kb)
        self.longest_s = max(self.longest_s, outcome.wall_s)
        found = broken_promise(outcome)
        if found is not None:
            self.findings.setdefault(found, (mutant, outcome))
            self.times[found] += 1

    def check(self, messages: bool) -> None:
        """Fail on a failure not KNOWN (of the messages, or of how runs ended); xfail when
        the known ones are all there is."""
        mine = {p: f for p, f in self.findings.items() if about_messages(p) == messages}
        new = {p: f for p, f in mine.items() if p not in KNOWN}
        assert not new, "\n\n".join(
            f"{problem}:\n{mutant.describe()}\n{outcome.verdict()}"
            for problem, (mutant, outcome) in new.items()
        )
        if mine:
            pytest.xfail("; ".join(KNOWN[p] for p in mine))

    def write(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as out:
            summary = {"mutants": sum(self.codes.values()), "exit_codes": dict(self.codes),
                       "peak_rss_mb": self.peak_rss_kb // 1024, "longest_s": self.longest_s}  # fmt: skip
            out.write(json.dumps(summary) + "\n")
            for problem, (mutant, outcome) in self.findings.items():
                lines = outcome.stderr.strip().splitlines() or [""]
                row = {"problem": problem, "mutants": self.times[problem],
                       "exit": outcome.code, "signal": outcome.signal,
                       "first_line": lines[0][:300], "last_line": lines[-1][:300],
                       "mutant": mutant.describe(1500)}  # fmt: skip
                out.write(json.dumps(row, ensure_ascii=False) + "\n")


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory, server: ForkServer) -> Fuzzed:
    """Run the mutants once for both tests; each in a folder two levels below the test's own,
    so that a `../` in a mutant stays inside it."""
    top = tmp_path_factory.mktemp("fuzz")
    world = top / "a" / "b" / "world"
    (world / "home").mkdir(parents=True)
    env = clean_env(world)
    seen = Fuzzed()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=SEED is None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(mutant=mutants(seeds()))
    def one(mutant: Mutant) -> None:
        for old in world.glob("*.*"):
            old.unlink()
        (world / mutant.file).write_text(mutant.text, encoding="utf-8")
        seen.add(mutant, server.run(list(mutant.argv), env, world, top, LIMITS))

    (hypothesis_seed(int(SEED))(one) if SEED is not None else one)()
    if REPORT:
        seen.write(REPORT)
    return seen


def test_fuzz_exit_codes_tracebacks_hangs(fuzzed: Fuzzed) -> None:
    assert sum(fuzzed.codes.values()) >= min(EXAMPLES, 100), fuzzed.codes
    fuzzed.check(messages=False)


def test_fuzz_messages(fuzzed: Fuzzed) -> None:
    fuzzed.check(messages=True)
