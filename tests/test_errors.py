"""Errors as data: the setting, the value and the fix travel with each error, and each caller says
them in its own words (the Python API's `Options` fields in `str(error)`, the CLI's flags)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import gpuplace
from gpuplace.cli.words import CLI
from gpuplace.errors import API, BadInput, Message, RuntimeFailure, Setting, Term
from tests.conftest import Run, write_spec
from tests.memory.helpers import matmul_graph

TOWERS = str(Path(__file__).resolve().parent.parent / "examples" / "guide" / "04_multi_tower.yaml")
SEEN = gpuplace.view(gpuplace.discover("4xK520"), {})


def test_every_term_has_words_in_both_dialects() -> None:
    assert set(API.terms) == set(CLI.terms) == set(Term)


@pytest.mark.parametrize(
    ("ref", "api", "cli"),
    [
        (Setting("memory_limit"), "Options.memory_limit", "--memory-limit"),
        (Setting("memory_limit", "64MiB"), "Options.memory_limit='64MiB'", "--memory-limit 64MiB"),
        (Setting("replicate", "abc", quote=True), "Options.replicate='abc'", "--replicate 'abc'"),
        (Setting("allow_growth", False), "Options.allow_growth=False", "--no-allow-growth"),
        (Setting("log_device_placement"), "Options.log_device_placement", "--log-placement"),
        (Setting("feeds"), "Options.feeds", "--feed"),
        (Setting("feeds", key="x"), "Options.feeds['x']", "--feed x"),
        (Setting("feeds", "[1, 2]", key="x"), "Options.feeds['x']='[1, 2]'", "--feed x=[1, 2]"),
    ],
)  # fmt: skip
def test_a_setting_in_each_dialect(ref: Setting, api: str, cli: str) -> None:
    assert (API.word(ref), CLI.word(ref)) == (api, cli)


def test_an_error_carries_the_setting_the_value_and_the_fix(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "graph:\n  - {name: x, op: placeholder, shape: [8, 2]}\n")
    with pytest.raises(RuntimeFailure) as info:
        gpuplace.prepare(spec, SEEN, gpuplace.Options(replicate=8), {})
    error = info.value
    assert (error.setting, error.value) == (Setting("replicate", 8), 8)
    assert API.say(error.message) == "Options.replicate=8: this process sees 4 GPUs (GPU:0..GPU:3)"
    assert (
        error.fix is not None
        and CLI.say(error.fix) == "give --replicate 4 or fewer, or --replicate all"
    )
    assert str(error) == f"{API.say(error.message)}; {API.say(error.fix)}"
    again = pickle.loads(pickle.dumps(error))
    assert (str(again), again.render(CLI), again.exit_code) == (str(error), error.render(CLI), 1)


def test_a_message_without_a_setting_or_a_fix_says_so() -> None:
    error = BadInput(Message("Memory growth ...: drop ", Setting("allow_growth")))
    assert (error.setting, error.value, error.fix) == (None, None, None)
    assert (str(error), error.render(CLI)) == (
        "Memory growth ...: drop Options.allow_growth",
        "Memory growth ...: drop --allow-growth",
    )


def test_a_predicted_oom_keeps_its_fix_apart(tmp_path: Path) -> None:
    spec = matmul_graph(tmp_path / "g.yaml")
    one = gpuplace.view(gpuplace.discover("1xK520"), {})
    prepared = gpuplace.prepare(spec, one, gpuplace.Options(memory_limit="10MiB"), {})
    _, oom = gpuplace.predict_memory(prepared, one)
    assert oom is not None and oom.fix is not None
    assert CLI.say(oom.message).endswith(
        "nothing was run or allocated; pass --force to run anyway."
    )
    assert (API.say(oom.fix), CLI.say(oom.fix)) == (
        "give the device more memory (Options.memory_limit / Options.virtual_gpus).",
        "give the device more memory (--memory-limit / --virtual-gpus).",
    )


def test_the_debug_traceback_ends_in_the_clis_words_too(run: Run) -> None:
    result = run("--debug", "--machine", "4xK520", "run", TOWERS, "--memory-fraction", "1.5")
    assert result.code == 2
    assert "gpuplace.errors.BadInput: --memory-fraction: per_process_gpu_memory" in result.err
    assert "Options." not in result.err


SETTINGS = st.builds(Setting, st.sampled_from(["a", "b"]), st.integers(), st.none(), st.booleans())


@given(st.lists(st.one_of(st.text(max_size=5), SETTINGS), max_size=3))
def test_a_message_is_a_value_of_its_parts(parts: list[str | Setting]) -> None:
    """As the frozen dataclass it was: equal (and hashed alike) exactly when its parts are,
    immutable, and pickled whole."""
    message, same, other = Message(*parts), Message(*parts), Message(*parts, "!")
    assert (message == same, hash(message) == hash(same), message == other) == (True, True, False)
    assert message != tuple(parts) and repr(message) == f"Message(parts={tuple(parts)!r})"
    assert pickle.loads(pickle.dumps(message)) == message
    with pytest.raises(AttributeError):
        message.parts = ()  # type: ignore[misc]
