"""The two windows a run across hosts could hang or leak in, without Dask: the gather after the
run's wait (a worker that dies there), and run state a dead client never closed."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplace.execute import dask_run, dask_session, task_state
from gpuplace.memory.policy import resolve_policy
from tests.cluster_run.helpers import T0, T1

ADDRESSES = {T0: "tcp://127.0.0.1:1000", T1: "tcp://127.0.0.1:1001"}


class _Client:
    """The scheduler's view of its workers; `names` changes when a worker leaves."""

    status = "running"

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names
        self.scheduler = self  # its rpc: `identity`

    def sync(self, call: Any, **kwargs: Any) -> Any:  # runs the scheduler's call, here at once
        return call(**kwargs)

    def identity(self, n_workers: int) -> dict[str, Any]:
        return {"workers": {a: {"name": n} for a, n in self.names.items()}}


class _Pending:
    """A future whose value never arrives (its worker died while it was being fetched)."""

    def __init__(self, key: str) -> None:
        self.key = key

    def result(self, timeout: float) -> Any:
        raise TimeoutError


class _Done(_Pending):
    def result(self, timeout: float) -> Any:
        return self.key


def _watch(names: dict[str, str]) -> dask_run.Watch:
    session = dask_session.Session(_Client(names), "tcp://127.0.0.1:999")
    watch = dask_run.Watch(session, ADDRESSES, {T0: "node0", T1: "node1"})
    watch.keys.update({"a": T0, "b": T1})
    return watch


def test_gather_fails_naming_the_task_whose_worker_left_after_the_wait() -> None:
    only_t0 = {ADDRESSES[T0]: str(T0)}  # task 1's worker is gone
    with pytest.raises(dask_run.TaskLost) as lost:
        dask_run.gather([_Done("a"), _Pending("b")], _watch(only_t0))
    assert lost.value.task == T1
    assert str(lost.value).startswith(
        "/job:worker/replica:0/task:1 (worker tcp://127.0.0.1:1001, host node1) left the "
        "cluster during the run"
    )


def test_gather_gives_up_after_its_limit_when_a_worker_stays_but_never_answers() -> None:
    both = {a: str(t) for t, a in ADDRESSES.items()}
    assert dask_run.gather([_Done("a"), _Done("b")], _watch(both)) == ["a", "b"]
    with pytest.raises(dask_run.TaskLost) as stuck:
        dask_run.gather([_Pending("b")], _watch(both), limit=0.0)
    assert str(stuck.value) == (
        "/job:worker/replica:0/task:1 (worker tcp://127.0.0.1:1001, host node1) did not hand "
        "over the run's results within 0 s: its process is stuck or its host is unreachable; "
        "nothing was retried. Check its log and run again."
    )


def test_run_state_left_idle_by_a_dead_client_is_dropped_at_the_next_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(task_state.MACHINE_ENV, "1xK20m")
    monkeypatch.setattr(task_state, "_RUNS", {})
    policy = resolve_policy({}, {}, {})
    task_state.open_run("dead-client", T1, policy)
    task_state.open_run("alive", T1, policy)
    assert task_state.expire_idle() == []  # both fresh
    task_state._RUNS["dead-client", T1].used -= task_state.IDLE_EXPIRY + 1
    task_state.open_run("next", T1, policy)
    assert sorted(run for run, _ in task_state._RUNS) == ["alive", "next"]
    assert task_state.close_run("dead-client", T1) is None
