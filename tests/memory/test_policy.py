"""TensorFlow's memory policies as arithmetic: the numbers TF logs, its rules and its messages."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplace.cli.words import CLI
from gpuplace.devices.model import Gpu, VisibleGpu
from gpuplace.errors import BadInput
from gpuplace.memory.ledger import Ledger
from gpuplace.memory.policy import (
    Policy,
    logical_gpus,
    min_system_memory,
    parse_virtual,
    resolve_policy,
)
from tests.fakes.fake_pynvml import MiB

GiB = 1024 * MiB


def visible(cuda_index: int, total_mib: int, free_mib: int, cc: str | None = "7.0") -> VisibleGpu:
    gpu = Gpu(
        nvml_index=cuda_index, product="Tesla V100-PCIE-32GB", uuid=f"GPU-{cuda_index}",
        pci_bus_id=f"00000000:{0x82 + cuda_index:02X}:00.0", memory_total=total_mib * MiB,
        memory_used=(total_mib - free_mib) * MiB, memory_free=free_mib * MiB,
        compute_capability=cc,
    )  # fmt: skip
    return VisibleGpu(cuda_index, gpu)


@pytest.mark.parametrize(
    ("available", "cc_major", "margin_mib"),
    [
        (2 * GiB - 1, 9, 225),  # under 2 GiB free: 225 MiB whatever the card
        (100 * MiB, None, 225),
        (2 * GiB, 3, 500),  # cc <= 6: 500 MiB
        (2 * GiB, 6, 500),
        (16 * GiB, None, 500),  # unknown capability: the oldest rule
        (16 * GiB, 7, 1050),  # cc 7.x: 1050 MiB
        (16 * GiB, 8, 1536),  # cc 8.x: 1536 MiB
        (80 * GiB, 9, 1800),  # cc >= 9: 1800 MiB (newest gpu_device.cc)
        (140 * GiB, 10, 1800),
        (140 * GiB, 12, 1800),
    ],
)
def test_min_system_memory_table(available: int, cc_major: int | None, margin_mib: int) -> None:
    assert min_system_memory(available, cc_major) == margin_mib * MiB


def test_default_v100_reserves_what_tensorflow_logs() -> None:
    # TF logs "Created device ... with 30985 MB memory" for a V100-32GB: bytes_limit >> 20 with
    # bytes_limit = free - 1050 MiB (cc 7.0) and 32035 MiB free. The "32034 MiB free"
    # is nvidia-smi's view of the same card (used memory rounded to whole MiB).
    [gpu] = logical_gpus([visible(0, 32510, 32035)], Policy())
    assert gpu.limit >> 20 == 30985
    assert gpu.limit == (32035 - 1050) * MiB
    assert gpu.reserve == gpu.limit  # preallocated up front
    assert not gpu.growth and gpu.name == "/device:GPU:0"


def test_default_reserves_every_visible_gpu_by_its_own_free_memory() -> None:
    gpus = [
        visible(0, 32510, 32035),
        visible(1, 15360, 1500, cc="7.5"),
        visible(2, 81920, 81000, cc="8.0"),
    ]
    limits = [g.limit for g in logical_gpus(gpus, Policy())]
    assert limits == [(32035 - 1050) * MiB, (1500 - 225) * MiB, (81000 - 1536) * MiB]


def test_default_keeps_all_free_memory_when_the_margin_would_take_it_all() -> None:
    [gpu] = logical_gpus([visible(0, 1024, 200)], Policy())  # 225 MiB margin >= 200 MiB free
    assert gpu.limit == gpu.reserve == 200 * MiB


def test_fraction_is_of_total_memory_and_preallocated() -> None:
    [gpu] = logical_gpus([visible(0, 32510, 1000)], Policy(fraction=0.4))
    assert gpu.limit == int(32510 * MiB * 0.4)
    assert gpu.reserve == gpu.limit


def test_fraction_with_growth_reserves_nothing_up_front() -> None:
    [gpu] = logical_gpus([visible(0, 32510, 32035)], Policy(allow_growth=True, fraction=0.5))
    assert (gpu.limit, gpu.reserve, gpu.growth) == (32510 * MiB // 2, 0, True)


def test_allow_growth_keeps_the_default_limit() -> None:
    [gpu] = logical_gpus([visible(0, 32510, 32035)], Policy(allow_growth=True))
    assert (gpu.limit, gpu.reserve, gpu.growth) == ((32035 - 1050) * MiB, 0, True)


def test_memory_limit_per_gpu() -> None:
    policy = resolve_policy({}, {"memory_limit": "64MiB"}, {})
    gpus = logical_gpus([visible(0, 32510, 32035), visible(1, 32510, 100)], policy)
    assert [(g.limit, g.reserve) for g in gpus] == [(64 * MiB, 64 * MiB)] * 2
    assert policy.name() == "limit 64 MiB"


def test_virtual_gpus_are_numbered_as_tensorflow_numbers_them() -> None:
    policy = resolve_policy({}, {"virtual_gpus": "GPU:1=1GiB;GPU:0=2GiB,512MiB"}, {})
    assert policy.virtual == {1: (GiB,), 0: (2 * GiB, 512 * MiB)}
    gpus = logical_gpus([visible(0, 32510, 32035), visible(1, 32510, 32035)], policy)
    assert [(g.name, g.gpu.cuda_index, g.limit) for g in gpus] == [
        ("/device:GPU:0", 0, 2 * GiB),
        ("/device:GPU:1", 0, 512 * MiB),
        ("/device:GPU:2", 1, GiB),
    ]
    assert all(g.reserve == g.limit and not g.growth for g in gpus)


def test_virtual_devices_from_config_as_tfs_proto() -> None:
    # config.proto's example: one entry per visible GPU; an empty entry keeps the default limit
    options = {"experimental": {"virtual_devices": [{"memory_limit_mb": [1024, 2048]}, {}]}}
    gpus = logical_gpus(
        [visible(0, 32510, 32035), visible(1, 32510, 32035)], resolve_policy(options, {}, {})
    )
    assert [(g.index, g.gpu.cuda_index, g.limit >> 20) for g in gpus] == [
        (0, 0, 1024),
        (1, 0, 2048),
        (2, 1, 30985),
    ]


def test_virtual_gpu_naming_a_gpu_the_process_does_not_see() -> None:
    with pytest.raises(
        BadInput, match=r"names GPU:3, but this process sees 2 GPUs \(GPU:0..GPU:1\)"
    ):
        logical_gpus([visible(0, 1024, 1000), visible(1, 1024, 1000)], Policy(virtual={3: (MiB,)}))


@pytest.mark.parametrize("text", ["GPU:0", "GPU:0=", "GPU:0=0MiB", "GPU:x=1GiB", "GPU:0=1GiB,lots"])
def test_bad_virtual_gpus_text(text: str) -> None:
    with pytest.raises(BadInput) as err:
        parse_virtual(text)
    assert err.value.render(CLI).startswith("--virtual-gpus: ")


def test_growth_with_virtual_devices_is_rejected_with_tfs_reason() -> None:
    for options, flags in [({}, {"allow_growth": True}), ({"allow_growth": True}, {})]:
        with pytest.raises(BadInput) as err:
            resolve_policy(options, {**flags, "virtual_gpus": "GPU:0=1GiB"}, {})
        assert str(err.value).startswith(
            "Memory growth cannot be configured on a PhysicalDevice with virtual devices configured"
        )


def test_env_growth_applies_to_virtual_devices() -> None:
    # TF_FORCE_GPU_ALLOW_GROWTH acts in the C++ allocator, which TF's Python check never sees
    policy = resolve_policy(
        {}, {"virtual_gpus": "GPU:0=1GiB"}, {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    )
    [gpu] = logical_gpus([visible(0, 32510, 32035)], policy)
    assert (gpu.limit, gpu.reserve, gpu.growth) == (GiB, 0, True)


def test_fraction_with_virtual_devices_is_rejected_with_tfs_reason() -> None:
    with pytest.raises(BadInput) as err:
        resolve_policy({"per_process_gpu_memory_fraction": 0.5}, {"virtual_gpus": "GPU:0=1GiB"}, {})
    assert str(err.value).startswith(
        "It's invalid to set both virtual devices and per_process_gpu_memory_fraction at the same time"
    )


@pytest.mark.parametrize("value", [0, 0.0, -0.1, 1.0001, 1.5, math.nan, math.inf, "lots", True])
def test_fraction_outside_zero_one_is_bad_input(value: Any) -> None:
    with pytest.raises(BadInput, match=r"must be in \(0, 1\]"):
        resolve_policy({}, {"memory_fraction": value}, {})
    with pytest.raises(BadInput, match=r"config.gpu_options: per_process_gpu_memory_fraction"):
        resolve_policy({"per_process_gpu_memory_fraction": value}, {}, {})


@pytest.mark.parametrize("value", [1e-9, 0.4, 1])
def test_fraction_inside_zero_one(value: float) -> None:
    assert resolve_policy({}, {"memory_fraction": value}, {}).fraction == value


def test_flags_override_config() -> None:
    options = {"allow_growth": True, "per_process_gpu_memory_fraction": 0.3}
    policy = resolve_policy(options, {"allow_growth": False, "memory_fraction": 0.6}, {})
    assert (policy.allow_growth, policy.fraction) == (False, 0.6)
    assert resolve_policy(options, {}, {}).name() == "fraction 0.3 + allow_growth"


OVERRIDE = (
    "Overriding allow_growth setting because the TF_FORCE_GPU_ALLOW_GROWTH environment variable "
    "is set. Original config value was {}."
)
UNPARSED = (
    'The TF_FORCE_GPU_ALLOW_GROWTH environment variable is set but could not be parsed: "{}". '
    'Valid values are "true" or "false". Using original config value of {}.'
)


@pytest.mark.parametrize(
    ("config", "flag", "env", "growth", "warning"),
    [
        (False, None, None, False, None),
        (True, None, None, True, None),
        (True, False, None, False, None),  # the flag beats the spec
        (False, None, "true", True, OVERRIDE.format("false")),  # the env beats both
        (True, False, "true", True, OVERRIDE.format("false")),
        (True, None, "false", False, OVERRIDE.format("true")),
        (False, True, "false", False, OVERRIDE.format("true")),
        (True, None, "true", True, None),  # agreeing: no warning
        (False, None, "True", False, UNPARSED.format("True", "false")),  # only exact strings
        (True, None, "1", True, UNPARSED.format("1", "true")),
        (False, True, "", True, UNPARSED.format("", "true")),
    ],
)
def test_env_growth_precedence_and_warnings(
    config: bool, flag: bool | None, env: str | None, growth: bool, warning: str | None
) -> None:
    environ = {} if env is None else {"TF_FORCE_GPU_ALLOW_GROWTH": env}
    policy = resolve_policy({"allow_growth": config}, {"allow_growth": flag}, environ)
    assert policy.allow_growth is growth
    assert policy.warnings == (() if warning is None else (warning,))


# --- BFC growth (allow_growth): Ledger._extend against bfc_allocator.cc's Extend ---


@dataclass
class TfBfc:
    """`BFCAllocator::Extend`, transcribed: the region each Extend(rounded_bytes) adds."""

    memory_limit: int
    curr_region_allocation_bytes: int = 2 * MiB  # allow_growth: min(total, 2 << 20)
    total_region_allocated_bytes: int = 0

    def extend(self, rounded_bytes: int) -> int | None:
        available_bytes = self.memory_limit - self.total_region_allocated_bytes
        available_bytes = (available_bytes // 256) * 256
        if rounded_bytes > available_bytes:
            return None
        increased_allocation = False
        while rounded_bytes > self.curr_region_allocation_bytes:
            self.curr_region_allocation_bytes *= 2
            increased_allocation = True
        size = min(self.curr_region_allocation_bytes, available_bytes)
        if not increased_allocation:
            self.curr_region_allocation_bytes *= 2
        self.total_region_allocated_bytes += size
        return size


@given(
    limit=st.integers(4 * MiB, 8 * GiB),
    requests=st.lists(st.integers(1, 256 * MiB // 256).map(lambda n: n * 256), max_size=30),
)
def test_extend_adds_the_regions_tf_adds(limit: int, requests: list[int]) -> None:
    tf = TfBfc(limit)
    ledger = Ledger("/device:GPU:0", limit, growth=True)
    for request in requests:
        before = ledger.reserved
        region = tf.extend(request)
        if region is None:  # TF fails this Extend; the ledger's limit check comes first
            break
        ledger._extend(request)
        assert ledger.reserved - before == region
        assert ledger.next_region == tf.curr_region_allocation_bytes
    assert ledger.reserved == tf.total_region_allocated_bytes


def test_growth_regions_double_and_are_never_released() -> None:
    ledger = Ledger("/device:GPU:0", 64 * MiB, growth=True)
    seen = []
    for _ in range(6):
        ledger.allocate(MiB, "op")
        seen.append(ledger.reserved >> 20)
    # 1 MiB pieces: a 2 MiB region holds two, then 4 MiB (4 pieces), ...
    assert seen == [2, 2, 6, 6, 6, 6]
    ledger.free(6 * MiB)
    ledger.release()
    assert (ledger.in_use, ledger.reserved, ledger.peak) == (0, 6 * MiB, 6 * MiB)


def test_a_request_larger_than_the_free_space_gets_a_region_of_its_own() -> None:
    # 1 MiB in a 2 MiB region, then 5 MiB: no chunk spans regions, so TF's Extend(5 MiB)
    # doubles the 4 MiB region size to 8 MiB: 2 + 8 = 10 MiB reserved, not 2 + 4
    ledger = Ledger("/device:GPU:0", None, growth=True)
    ledger.allocate(MiB, "a")
    ledger.allocate(5 * MiB, "b")
    tf = TfBfc(10**15)
    assert [tf.extend(MiB), tf.extend(5 * MiB)] == [2 * MiB, 8 * MiB]
    assert ledger.reserved == tf.total_region_allocated_bytes == 10 * MiB


def test_growth_is_capped_at_the_limit() -> None:
    limit = 5 * MiB + 100  # TF rounds what is left down to 256 B
    ledger = Ledger("/device:GPU:0", limit, growth=True)
    ledger.allocate(2 * MiB, "a")
    ledger.allocate(3 * MiB, "b")
    assert ledger.reserved == 5 * MiB


def test_limit_flag_overrides_the_configs_fraction_and_says_so() -> None:
    policy = resolve_policy({"per_process_gpu_memory_fraction": 0.5}, {"memory_limit": "64MiB"}, {})
    assert (policy.fraction, policy.memory_limit) == (None, 64 * MiB)
    assert tuple(map(CLI.say, policy.warnings)) == (
        "--memory-limit 64MiB overrides config.gpu_options.per_process_gpu_memory_fraction 0.5: "
        "each GPU's limit is 64MiB",
    )
    assert policy.name() == "limit 64 MiB"


def test_limit_with_every_gpu_split_is_refused() -> None:
    policy = resolve_policy({}, {"memory_limit": "64MiB", "virtual_gpus": "GPU:0=1GiB,1GiB"}, {})
    with pytest.raises(BadInput) as err:
        logical_gpus([visible(0, 32510, 32035)], policy)
    assert err.value.render(CLI) == (
        "--memory-limit 64.0 MiB conflicts with --virtual-gpus: every visible GPU is split into "
        "logical GPUs with their own sizes, so the limit would apply to none; drop --memory-limit"
    )
    # a GPU left whole takes the limit: nothing dropped
    gpus = logical_gpus([visible(0, 32510, 32035), visible(1, 32510, 32035)], policy)
    assert [g.limit for g in gpus] == [GiB, GiB, 64 * MiB]


def test_virtual_devices_messages_name_where_they_came_from() -> None:
    two = {
        "experimental": {"virtual_devices": [{"memory_limit_mb": [1]}, {"memory_limit_mb": [1]}]}
    }
    with pytest.raises(BadInput) as err:
        resolve_policy({**two, "allow_growth": True}, {}, {})
    assert str(err.value).endswith(
        "(TensorFlow's rule): drop config.gpu_options.allow_growth or "
        "config.gpu_options.experimental.virtual_devices"
    )
    with pytest.raises(BadInput) as err:
        logical_gpus([visible(0, 1024, 1000)], resolve_policy(two, {}, {}))
    assert str(err.value) == (
        "config.gpu_options.experimental.virtual_devices names GPU:1, but this process sees 1 GPU "
        "(GPU:0)"
    )


def test_virtual_gpus_over_a_cards_free_memory_name_other_processes() -> None:
    policy = resolve_policy({}, {"virtual_gpus": "GPU:0=600MiB,600MiB"}, {})
    with pytest.raises(BadInput) as err:
        logical_gpus([visible(0, 1024, 1000)], policy)
    assert err.value.render(CLI) == (
        "--virtual-gpus asks 1.2 GiB in all for the 2 logical GPUs of GPU:0 (Tesla V100-PCIE-32GB), "
        "which has 1000.0 MiB free (other processes use 24.0 MiB); give sizes that add up to at "
        "most 1000.0 MiB (e.g. --virtual-gpus GPU:0=500MiB,500MiB)"
    )
