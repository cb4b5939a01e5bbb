"""Memory ledgers: BFC rounding, in-use and peak, limits, and the OOM message."""

from __future__ import annotations

import pytest

from gpuplace.memory.ledger import Ledger, OutOfMemory, allocation_size, new_ledgers

GPU = "/job:localhost/replica:0/task:0/device:GPU:0"


@pytest.mark.parametrize(("nbytes", "charged"), [(0, 0), (1, 256), (256, 256), (257, 512)])
def test_allocations_round_up_to_256_bytes_as_tf_bfc(nbytes: int, charged: int) -> None:
    assert allocation_size(nbytes) == charged


def test_ledger_counts_in_use_and_peak_and_release_keeps_the_peak() -> None:
    ledger = Ledger(GPU)
    ledger.allocate(512, "a")
    ledger.allocate(256, "b")
    ledger.free(512)
    ledger.allocate(256, "c")
    assert (ledger.in_use, ledger.peak) == (512, 768)
    ledger.release()
    assert (ledger.in_use, ledger.peak) == (0, 768)


def test_an_allocation_past_the_limit_raises_and_charges_nothing() -> None:
    ledger = Ledger(GPU, limit=1024)
    ledger.allocate(1024, "a")
    with pytest.raises(OutOfMemory) as caught:
        ledger.allocate(256, "b")
    assert (caught.value.op, caught.value.device, caught.value.limit) == ("b", GPU, 1024)
    assert (ledger.in_use, ledger.peak) == (1024, 1024)


def test_oom_message_without_a_limit_carries_the_detail() -> None:
    error = OutOfMemory("m", GPU, 3 * 1024**3, 1024, None, " (cupy: Out of memory ...)")
    assert str(error).startswith(
        f"OOM when allocating 3.0 GiB (3221225472 B) for op 'm' on {GPU}: 1.0 KiB (1024 B) in use, "
        "no memory limit set (cupy: Out of memory ...). The run stopped"
    )


def test_new_ledgers_follow_the_device_order_with_their_limits() -> None:
    ledgers = new_ledgers(["cpu", GPU], {GPU: 2048})
    assert [(ledger.device, ledger.limit) for ledger in ledgers] == [("cpu", None), (GPU, 2048)]
