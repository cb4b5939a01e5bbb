"""Ask the CUDA driver for its devices in the order it numbers them; run by `libcuda.py` as a
child process (`python -I -S this_file`), so that the caller's CUDA_VISIBLE_DEVICES and
CUDA_DEVICE_ORDER do not apply, a hung or crashing driver cannot take gpuplace down, and gpuplace
itself never initialises CUDA. Standard library only (ctypes, as nvitop's `libcuda.py` does): no
CUDA toolkit, no cupy.

Prints one JSON line: `{"devices": [{"bus": "0000:25:00.0", "uuid": "GPU-..."}, ...]}` in CUDA's
order, or `{"error": "cuInit returned 100 (CUDA_ERROR_NO_DEVICE)"}`.
"""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any

LIBRARIES = (  # the loader's path first, then where distros and WSL keep it (nvitop's list)
    "libcuda.so.1",
    "/usr/lib64/nvidia/libcuda.so.1",
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib/wsl/lib/libcuda.so.1",
    "libcuda.so",  # last: a toolkit's stub answers CUDA_ERROR_STUB_LIBRARY
)
ERRORS = {
    1: "CUDA_ERROR_INVALID_VALUE",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY",
    35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    304: "CUDA_ERROR_OPERATING_SYSTEM",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}


class CudaError(Exception):
    """A driver call failed, or there is no driver library."""


def load(names: tuple[str, ...] = LIBRARIES) -> Any:
    """The CUDA driver library (the first of `names` that loads)."""
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise CudaError("libcuda.so.1 (the CUDA driver library) was not found")


def _check(call: str, code: int) -> None:
    if code != 0:
        raise CudaError(f"{call} returned {code} ({ERRORS.get(code, 'see cuGetErrorName')})")


def uuid_text(raw: bytes) -> str:
    """A CUuuid's 16 bytes in nvidia-smi's form (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)."""
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def devices(lib: Any) -> list[dict[str, str]]:
    """Each device the driver enumerates, in its order: PCI bus id and UUID (a MIG device's own
    UUID where the driver has cuDeviceGetUuid_v2; its bus id is its parent GPU's)."""
    _check("cuInit", lib.cuInit(0))
    count = ctypes.c_int(0)
    _check("cuDeviceGetCount", lib.cuDeviceGetCount(ctypes.byref(count)))
    get_uuid = getattr(lib, "cuDeviceGetUuid_v2", None) or lib.cuDeviceGetUuid
    found = []
    for ordinal in range(min(count.value, 1024)):
        device = ctypes.c_int(0)
        _check("cuDeviceGet", lib.cuDeviceGet(ctypes.byref(device), ordinal))
        bus = ctypes.create_string_buffer(64)
        _check("cuDeviceGetPCIBusId", lib.cuDeviceGetPCIBusId(bus, 64, device))
        uuid = ctypes.create_string_buffer(16)
        _check("cuDeviceGetUuid", get_uuid(uuid, device))
        found.append({"bus": bus.value.decode("ascii", "replace"), "uuid": uuid_text(uuid.raw)})
    return found


def answer(loader: Any = load) -> dict[str, Any]:
    """The JSON document this child prints."""
    try:
        return {"devices": devices(loader())}
    except CudaError as exc:
        return {"error": str(exc)}
    except (AttributeError, OSError) as exc:  # a driver without these symbols
        return {"error": f"{type(exc).__name__}: {exc}"}


if __name__ == "__main__":
    sys.stdout.write(json.dumps(answer()) + "\n")
