"""Hostile inputs, class 1: files destroyed or written where they should not be (the `save` op,
`run --save`, the rates cache), and what a corrupt rates cache does to `run`, `plan` and `mem`."""

from __future__ import annotations

import zipfile
from pathlib import Path

from tests.hostile.cases import MATMUL, SIM, Case, Content, Folder, Link, q, spec
from tests.hostile.sandbox import KiB, Limits, Outcome

OLD = b"the previous file, which must survive\n"


def save_spec(path: str, value: str = "{name: a, op: constant, value: 1.0, shape: [2, 2]}") -> str:
    """A spec that writes op `a` to `path` with a `save` op, run as its only target."""
    return spec(value, f"{{name: sv, op: save, inputs: [a], path: {q(path)}}}", fetch="sv")


BIG = "{name: a, op: ones, shape: [512, 512]}"  # 1 MiB of float32: more than a 64 KiB write
SMALL_FILES = Limits(file_size=64 * KiB)  # a write past 64 KiB fails (EFBIG): a full disk
ESCAPE = "allow-writes-anywhere"


def _members_safe(world: Path, outcome: Outcome) -> None:
    """`--save` wrote an archive whose member names cannot climb out (zip slip), or refused."""
    if outcome.code != 0:
        return
    names = zipfile.ZipFile(world / "out.npz").namelist()
    assert names, "an empty archive"
    for name in names:  # a member can climb out only through a separator (or a drive)
        assert not any(c in name for c in "/\\:\0"), names


def _wrote_path_given(world: Path, outcome: Outcome) -> None:
    """A `save` to `result` wrote `result` (or was refused), never `result.npy`."""
    assert not (world / "result.npy").exists(), "wrote result.npy, not the path given"
    if outcome.code == 0:
        assert (world / "result").is_file(), "nothing at the path given"


CASES = [
    Case("save-dotdot", "files", (*SIM, "run", "a/b/g.yaml"), 2, ESCAPE,
         {"a/b/g.yaml": save_spec("../../out.npy")}),
    Case("save-dotdot-plan", "files", (*SIM, "plan", "a/b/g.yaml"), 2, ESCAPE,
         {"a/b/g.yaml": save_spec("../../out.npy")}),
    Case("save-dotdot-inside", "files", (*SIM, "run", "a/g.yaml"), 2, ESCAPE,
         {"a/g.yaml": save_spec("sub/../../out.npy"), "a/sub": Folder()}),
    Case("save-home", "files", (*SIM, "run", "g.yaml"), 2, ESCAPE, {"g.yaml": save_spec("~/x.npy")}),
    Case("save-absolute", "files", (*SIM, "run", "spec/g.yaml"), 2, ESCAPE,
         {"spec/g.yaml": save_spec("{world}/abs.npy")}),
    Case("save-symlink-file", "files", (*SIM, "run", "spec/g.yaml"), 2, ESCAPE,
         {"spec/g.yaml": save_spec("out.npy"), "spec/out.npy": Link("../victim.txt"),
          "victim.txt": OLD}),
    Case("save-symlink-absolute", "files", (*SIM, "run", "spec/g.yaml"), 2, ESCAPE,
         {"spec/g.yaml": save_spec("out.npy"), "spec/out.npy": Link("{world}/victim.txt"),
          "victim.txt": OLD}),
    Case("save-symlink-dangling", "files", (*SIM, "run", "spec/g.yaml"), 2, ESCAPE,
         {"spec/g.yaml": save_spec("out.npy"), "spec/out.npy": Link("../new.npy")}),
    Case("save-symlink-folder", "files", (*SIM, "run", "spec/g.yaml"), 2, ESCAPE,
         {"spec/g.yaml": save_spec("outdir/x.npy"), "spec/outdir": Link("../elsewhere"),
          "elsewhere": Folder()}),
    Case("save-overwrite-disk-full", "files", (*SIM, "run", "g.yaml"), 1, r"out\.npy",
         {"g.yaml": save_spec("out.npy", BIG), "out.npy": OLD}, limits=SMALL_FILES),
    Case("save-new-disk-full", "files", (*SIM, "run", "g.yaml"), 1, r"out\.npy",
         {"g.yaml": save_spec("out.npy", BIG)}, limits=SMALL_FILES),
    Case("save-is-folder", "files", (*SIM, "run", "g.yaml"), 2, r"out\.npy",
         {"g.yaml": save_spec("out.npy"), "out.npy": Folder()}),
    Case("save-without-npy", "files", (*SIM, "run", "g.yaml"), 0, r"ran sv",
         {"g.yaml": save_spec("result")}, outputs=("result",), check=_wrote_path_given),
    Case("save-nul", "files", (*SIM, "run", "g.yaml"), 2, r"NUL|null",
         {"g.yaml": save_spec("out\0.npy")}),
    Case("save-inside", "held", (*SIM, "run", "spec/g.yaml"), 0, "ran sv",
         {"spec/g.yaml": save_spec("sub/out.npy"), "spec/sub": Folder()},
         outputs=("spec/sub/out.npy",)),
    Case("cli-save-overwrite-disk-full", "files",
         (*SIM, "run", "g.yaml", "--save", "values.npz"), 1, r"values\.npz",
         {"g.yaml": spec(BIG), "values.npz": OLD}, limits=SMALL_FILES),
    Case("cli-save-new-disk-full", "files", (*SIM, "run", "g.yaml", "--save", "values.npz"), 1,
         r"cannot write", {"g.yaml": spec(BIG)}, limits=SMALL_FILES),
    Case("cli-save-zip-slip", "files", (*SIM, "run", "g.yaml", "--save", "out.npz"), (0, 2),
         r"\.\./\.\./evil",
         {"g.yaml": spec("{name: ../../evil, op: constant, value: 1.0}")},
         outputs=("out.npz",), check=_members_safe),
    Case("cli-save-missing-folder", "held", (*SIM, "run", "g.yaml", "--save", "no/v.npz"), 2,
         "does not exist", {"g.yaml": MATMUL}),
    Case("cli-save-folder", "held", (*SIM, "run", "g.yaml", "--save", "d"), 2, "is a directory",
         {"g.yaml": MATMUL, "d": Folder()}),
    Case("cli-save-dev-full", "held", (*SIM, "run", "g.yaml", "--save", "/dev/full"), 2, r"\.npz",
         {"g.yaml": MATMUL}),
]  # fmt: skip

# A corrupt rates cache never breaks a command: one warning, the presets, exit 0; the file is
# left for `devices --check` to rebuild (the suite's world hash says it was not touched here).
CACHE = "cache/gpuplace/rates.json"
RATE = '{"product": "p", "tflops": %s, "bandwidth_gbs": 100, "measured": "2026-11-29"}'
BAD_CACHES: dict[str, tuple[Content, str | None]] = {  # label: (content, what it raised before #12: a traceback)
    "deep": ("[" * 100_000, "a deeply nested rates cache raises RecursionError"),
    "huge-int": ('{"GPU-x": ' + RATE % ("9" * 400) + "}",
                 "a 400-digit number in the rates cache raises OverflowError"),
    "huge-float": ('{"GPU-x": ' + RATE % "1e999" + "}", None),
    "not-utf8": (b"\xff\xfe{\x00", None),
    "a-list": ("[]", None),
    "nan": ('{"GPU-x": ' + RATE % "NaN" + "}", None),
}  # fmt: skip
CASES += [
    Case(f"rates-{label}-{command}", "traceback" if why else "held",
         (*SIM, command, "g.yaml", "--strategy", "balanced"), 0, r"warning:.*rates",
         {"g.yaml": MATMUL, CACHE: content})
    for label, (content, why) in BAD_CACHES.items()
    for command in ("run", "plan", "mem")
]  # fmt: skip
CASES += [
    Case("rates-folder", "held", (*SIM, "plan", "g.yaml", "--strategy", "balanced"), 0,
         r"warning:.*rates", {"g.yaml": MATMUL, CACHE: Folder()}),
    Case("rates-home-cache-deep", "traceback", (*SIM, "run", "g.yaml"), 0, "",
         {"g.yaml": MATMUL, "home/.cache/gpuplace/rates.json": "[" * 100_000},
         env={"XDG_CACHE_HOME": ""}),
    Case("rates-env-deep", "traceback", (*SIM, "plan", "g.yaml"), 0, "",
         {"g.yaml": MATMUL, "r.json": "[" * 100_000}, env={"GPUPLACE_RATES": "{world}/r.json"}),
]  # fmt: skip

# `plan --format html -o FILE.html` (the user's flag): written atomically where it says, never
# through a link, never over a device; a failed write leaves the old page.
CHAIN = spec("{name: x, op: constant, value: 1.0, shape: [2, 2]}",
             *(f"{{name: n{i}, op: neg, inputs: [{'x' if i == 0 else f'n{i - 1}'}]}}" for i in range(300)))  # fmt: skip
HTML = (*SIM, "plan", "g.yaml", "--format", "html", "-o")
CASES += [
    Case("html-overwrite-disk-full", "files", (*HTML, "plan.html"), 1, r"plan\.html.*cannot write",
         {"g.yaml": CHAIN, "plan.html": OLD}, limits=SMALL_FILES),
    Case("html-symlink-file", "files", (*HTML, "plan.html"), 0, r"written to plan\.html",
         {"g.yaml": MATMUL, "plan.html": Link("victim.txt"), "victim.txt": OLD},
         outputs=("plan.html",)),
    Case("html-dev-full", "held", (*HTML, "/dev/full"), 2, r"\.html", {"g.yaml": MATMUL}),
    Case("html-spec-as-output", "files", (*SIM, "plan", "g.html", "--format", "html", "-o", "g.html"),
         2, r"is the graph spec", {"g.html": MATMUL}),
    Case("html-folder", "held", (*HTML, "d.html"), 2, "is a folder", {"g.yaml": MATMUL, "d.html": Folder()}),
]  # fmt: skip

# `plan --format device-map -o FILE.json` and `--format tf -o FILE.py`: the same rules as the page
DEVMAP = (*SIM, "plan", "g.yaml", "--format", "device-map", "-o")
CASES += [
    Case("devmap-symlink-file", "files", (*DEVMAP, "map.json"), 0, r"written to map\.json",
         {"g.yaml": MATMUL, "map.json": Link("victim.txt"), "victim.txt": OLD},
         outputs=("map.json",)),
    Case("devmap-dev-full", "held", (*DEVMAP, "/dev/full"), 2, r"\.json", {"g.yaml": MATMUL}),
    Case("devmap-folder", "held", (*DEVMAP, "d.json"), 2, "is a folder", {"g.yaml": MATMUL, "d.json": Folder()}),
    Case("tf-spec-as-output", "files", (*SIM, "plan", "g.py", "--format", "tf", "-o", "g.py"),
         2, r"is the graph spec", {"g.py": MATMUL}),
]  # fmt: skip
