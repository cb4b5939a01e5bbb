"""Task-qualified device names: the contract between the cluster's placement and its runtime."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplace.devices.cluster import TaskName, full_device, split_device
from gpuplace.errors import BadInput

jobs = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,8}", fullmatch=True)


@given(jobs, st.integers(0, 999), st.integers(0, 9), st.sampled_from(["CPU:0", "GPU:0", "GPU:7"]))
def test_full_names_round_trip(job: str, task: int, replica: int, local: str) -> None:
    name = TaskName(job, task, replica)
    assert TaskName.parse(str(name)) == name
    assert split_device(full_device(name, local)) == (name, local)


def test_full_name_text() -> None:
    assert (
        full_device(TaskName("worker", 1), "GPU:0") == "/job:worker/replica:0/task:1/device:GPU:0"
    )


@pytest.mark.parametrize("bad", ["/gpu:0", "/job:worker/task:1/device:GPU:0", "GPU:0", ""])
def test_partial_names_are_refused_with_the_form(bad: str) -> None:
    with pytest.raises(BadInput, match="/job:NAME/replica:N/task:N/device:TYPE:N"):
        split_device(bad)
