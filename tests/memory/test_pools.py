"""Real GPUs (a fake NVML machine and fake cupy): each card's cupy pool carries the policy's
limit and holds the reservation while the graph runs, and gives everything back afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuplace.cli import AppContext
from gpuplace.memory.pools import DeviceMemory
from gpuplace.options import Options
from gpuplace.pipeline import execute_prepared, prepare
from tests.fakes.fake_cupy import make_fake_cupy
from tests.fakes.fake_pynvml import MiB
from tests.memory.helpers import GPU0, GPU1, LinkedNvml, matmul_graph, pool_state, small_gpus

LIMIT = (1020 - 225) * MiB  # 1 GiB cards with 4 MiB used: 1020 MiB free, under 2 GiB: 225 MiB kept


def run_observed(
    graph: str, cupy: Any = None, **options: Any
) -> tuple[list[list[tuple[int, int]]], list[DeviceMemory], Any]:
    """Run `graph` on two fake 1 GiB cards; return the pools seen mid-run, the memory, cupy."""
    cupy = cupy or make_fake_cupy(2, 1024 * MiB)
    app = AppContext(
        env={}, nvml_loader=lambda: LinkedNvml(small_gpus(2), cupy), cupy_loader=lambda: cupy
    )
    view = app.view()
    prepared = prepare(graph, view, Options(**options), app.env)
    seen: list[list[tuple[int, int]]] = []
    outcome = execute_prepared(
        prepared, view, app.cupy_loader, observe=lambda _: seen.append(pool_state(cupy))
    )
    return seen, outcome.memory, cupy


def by_device(memory: list[DeviceMemory]) -> dict[str, tuple[int, int, int | None]]:
    return {m.device: (m.reserved, m.peak, m.limit) for m in memory if "GPU" in m.device}


def test_default_pools_carry_the_limit_and_hold_the_reservation(tmp_path: Path) -> None:
    seen, memory, cupy = run_observed(matmul_graph(tmp_path / "g.yaml"))
    assert seen == [[(LIMIT, LIMIT), (LIMIT, LIMIT)]]  # (get_limit, total_bytes) while held
    assert by_device(memory) == {GPU0: (LIMIT, 12 * MiB, LIMIT), GPU1: (LIMIT, 0, LIMIT)}
    assert pool_state(cupy) == [(0, 0), (0, 0)]  # released, limits lifted


def test_fraction_pools(tmp_path: Path) -> None:
    seen, memory, cupy = run_observed(matmul_graph(tmp_path / "g.yaml"), memory_fraction=0.25)
    assert seen == [[(256 * MiB, 256 * MiB)] * 2]
    assert by_device(memory)[GPU0] == (256 * MiB, 12 * MiB, 256 * MiB)
    assert pool_state(cupy) == [(0, 0), (0, 0)]


def test_growth_pools_hold_only_what_the_run_allocated(tmp_path: Path) -> None:
    seen, memory, cupy = run_observed(matmul_graph(tmp_path / "g.yaml"), allow_growth=True)
    assert seen == [[(LIMIT, 12 * MiB), (LIMIT, 0)]]  # cupy caches the freed arrays' blocks
    assert by_device(memory) == {GPU0: (12 * MiB, 12 * MiB, LIMIT), GPU1: (0, 0, LIMIT)}
    assert pool_state(cupy) == [(0, 0), (0, 0)]


def test_virtual_gpus_share_their_card_pool_without_double_counting(tmp_path: Path) -> None:
    graph = matmul_graph(tmp_path / "g.yaml", device="/gpu:1")  # the second logical GPU of card 0
    seen, memory, cupy = run_observed(graph, virtual_gpus="GPU:0=100MiB,200MiB")
    assert seen == [[(300 * MiB, 300 * MiB), (LIMIT, LIMIT)]]
    gpu2 = GPU0.replace("GPU:0", "GPU:2")
    assert by_device(memory) == {
        GPU0: (100 * MiB, 0, 100 * MiB),
        GPU1: (200 * MiB, 12 * MiB, 200 * MiB),
        gpu2: (LIMIT, 0, LIMIT),
    }
    assert pool_state(cupy) == [(0, 0), (0, 0)]


@pytest.mark.parametrize("options", [{}, {"allow_growth": True}])
def test_out_of_memory_releases_the_pools(tmp_path: Path, options: dict[str, Any]) -> None:
    from gpuplace.memory.ledger import OutOfMemory

    cupy = make_fake_cupy(2, 1024 * MiB)
    with pytest.raises(OutOfMemory) as err:
        run_observed(matmul_graph(tmp_path / "g.yaml"), cupy, memory_limit="10MiB", **options)
    assert pool_state(cupy) == [(0, 0), (0, 0)]
    assert (err.value.op, err.value.device, err.value.requested) == ("c", GPU0, 4 * MiB)
    assert (err.value.in_use, err.value.limit) == (8 * MiB, 10 * MiB)
    assert err.value.reserved == (8 * MiB if options else 10 * MiB)


def test_a_limit_that_is_no_multiple_of_cupys_unit_still_preallocates(tmp_path: Path) -> None:
    # 0.3 x 1 GiB = 322122547 B: the block is rounded down to cupy's 512 B (TF rounds its
    # region down to 256 B), so it stays inside the pool's limit
    seen, memory, cupy = run_observed(matmul_graph(tmp_path / "g.yaml"), memory_fraction=0.3)
    limit = int(1024 * MiB * 0.3)
    block = limit // 512 * 512
    assert seen == [[(limit, block), (limit, block)]]
    assert by_device(memory)[GPU0] == (block, 12 * MiB, limit)
    assert pool_state(cupy) == [(0, 0), (0, 0)]
