"""Sizes users type, and TensorFlow's device-name grammar (device_name_utils_test, DeviceSpec)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.devices.names import (
    DeviceNameError,
    DeviceSpec,
    MalformedDevice,
    canonical,
    full_name,
    parse_device,
    placer_view,
)
from gpuplace.errors import BadInput
from gpuplace.units import MAX_SIZE, GiB, human, mib, parse_size


@pytest.mark.parametrize(
    ("text", "size"),
    [("16GiB", 16 * GiB), ("500MB", 500_000_000), ("1.5GiB", 3 * GiB // 2), ("7 B", 7), ("2tib", 2 * 1024 * GiB), ("64KiB", 65536)],
)  # fmt: skip
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@given(st.integers(min_value=0, max_value=MAX_SIZE // 1024**2))  # sizes stop at 8 EiB
def test_mib_and_human_round_trip_whole_mib(n: int) -> None:
    assert parse_size(mib(n * 1024**2)) == n * 1024**2
    assert human(n).split()[1] in {"B", "KiB", "MiB", "GiB", "TiB"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("/cpu:0", "/device:CPU:0"),
        ("/gpu:1", "/device:GPU:1"),
        ("GPU:1", "/device:GPU:1"),
        ("/GPU:*", "/device:GPU:*"),
        ("gpu", "/device:GPU:*"),
        ("/device:gpu:0", "/device:GPU:0"),
        (
            "/job:localhost/replica:0/task:0/device:GPU:0",
            "/job:localhost/replica:0/task:0/device:GPU:0",
        ),
        (
            "/job:*/device:GPU/replica:4".replace("/device:GPU", "/gpu:*"),
            "/job:*/replica:4/device:GPU:*",
        ),
        ("/", ""),
        ("", ""),
    ],
)
def test_canonical(spec: str, expected: str) -> None:
    assert canonical(spec) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "/cpu:0/gpu:0",
            "Multiple device types are not allowed while parsing the device spec: /cpu:0/gpu:0.",
        ),
        (
            "/foo:0",
            "Unknown attribute 'foo' is encountered while parsing the device spec: '/foo:0'.",
        ),
        (
            "foobar",
            "Unknown attribute 'foobar' is encountered while parsing the device spec: 'foobar'.",
        ),
        ("/job:foo/replica:x", "invalid literal for int() with base 10: 'x'"),
        ("/job:foo/replica:1/task:2/bar:3", "Unknown attribute 'bar' is encountered"),
    ],
)
def test_rejected(spec: str, message: str) -> None:
    with pytest.raises(DeviceNameError) as err:
        parse_device(spec)
    assert message in str(err.value)
    assert " gpuplace: " in str(err.value)  # TF's words, then gpuplace's hint
    assert isinstance(err.value, BadInput)


@pytest.mark.parametrize(
    "spec", ["/job:foo/replica:-1", "/device:GPU:-1", "/job:a-b", "/job:", "/device::0",
             "/cpu:18446744073709551616"],
)  # fmt: skip
def test_python_accepts_what_the_placer_finds_malformed(spec: str) -> None:
    """tf.DeviceSpec takes these (int() and any text); the C++ placer's ParseFullName does not."""
    parsed = parse_device(spec)
    with pytest.raises(MalformedDevice):
        placer_view(parsed)


def test_placer_view_wildcards_and_c_ints() -> None:
    assert placer_view(parse_device("/job:*/device:*:*")) == DeviceSpec()
    assert placer_view(parse_device("/cpu:4294967297")).device_index == 1  # low 32 bits
    assert placer_view(parse_device("/cpu:2147483648")).device_index == -(2**31)


def test_merge_is_field_by_field_inner_wins() -> None:
    outer = parse_device("/job:worker")
    gpu = parse_device("/device:GPU:0").merged_into(outer)
    assert gpu.to_string() == "/job:worker/device:GPU:0"
    cpu = parse_device("/device:CPU:0").merged_into(gpu)
    assert cpu.to_string() == "/job:worker/device:CPU:0"
    assert parse_device("/job:ps").merged_into(cpu).to_string() == "/job:ps/device:CPU:0"
    assert parse_device("/gpu:*").merged_into(parse_device("/cpu:1")).to_string() == "/device:GPU:1"


def test_matches_local_devices() -> None:
    assert parse_device("/GPU:*").matches("GPU", 3)
    assert not parse_device("/job:worker/gpu:0").matches("GPU", 0)
    assert full_name("CPU", 0) == "/job:localhost/replica:0/task:0/device:CPU:0"


_PIECES = st.sampled_from(
    ["/", ":", "job", "replica", "task", "device", "cpu", "GPU", "Gpu", "tpu", "*", "0", "1",
     "-1", "+", "_", " ", "\u0661", "x", "localhost", "99999999999999999999"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join))
def test_canonical_strings_read_back_the_same(text: str) -> None:
    """Property: a string is refused with TF's words (a DeviceNameError, nothing else), or its
    canonical string (what TF stores as the op's device, and reads again when scopes merge)
    parses to the same spec; the placer's view of it is a spec or MalformedDevice."""
    try:
        spec = parse_device(text)
    except DeviceNameError as err:
        assert " gpuplace: " in str(err)
        return
    assert parse_device(spec.to_string()) == spec
    try:
        view = placer_view(spec)
    except MalformedDevice:
        return
    assert view.job != "*" and view.device_type != "*"
