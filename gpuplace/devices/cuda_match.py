"""Whether the installed cupy can run on this driver, told before anything runs.

nvidia-smi's header shows `CUDA Version`: the newest CUDA the driver supports. A cupy wheel is
built for one CUDA major version (`cupy-cuda12x`, `cupy-cuda13x`) and, within it, runs on any
driver of that major (CUDA's minor version compatibility); on an older major every CUDA call fails
with cudaErrorInsufficientDriver. `devices` warns about it, so a CI smoke check on a GPU node says
what `run` would hit.
"""

from __future__ import annotations

from collections.abc import Callable

CUPY_WHEELS = {"cupy-cuda11x": 11, "cupy-cuda12x": 12, "cupy-cuda13x": 13}  # wheel -> CUDA major


def cuda_text(version: int) -> str:
    """CUDA's integer version (12040, as NVML and the CUDA runtime give it) as nvidia-smi prints
    it (12.4)."""
    return f"{version // 1000}.{version % 1000 // 10}"


def installed_from() -> tuple[str | None, bool]:
    """The local folder pip installed gpuplace from (PEP 610's direct_url.json; None when it came
    from an index or the record cannot be read), and whether it is an editable install."""
    import json
    from importlib import metadata
    from urllib.parse import unquote, urlparse

    try:  # a source tree's gpuplace.egg-info (no record) can come first on sys.path: skip it
        texts = (d.read_text("direct_url.json") for d in metadata.distributions(name="gpuplace"))
        record = json.loads(next((t for t in texts if t), "{}"))
        url = urlparse(str(record.get("url", "")))
        editable = bool(record.get("dir_info", {}).get("editable", False))
    except (ValueError, AttributeError, OSError):
        return None, False
    return (unquote(url.path), editable) if url.scheme == "file" and url.path else (None, False)


def pip_target(extra: str) -> str:
    """What `pip install` takes to add `extra` to this gpuplace: the name from an index, the folder
    (with -e when editable) for a source checkout, where `gpuplace[extra]` cannot be found."""
    folder, editable = installed_from()
    if folder is None:
        return f"'gpuplace[{extra}]'"
    return f"{'-e ' if editable else ''}'{folder}[{extra}]'"


def install_cupy() -> str:
    """The pip commands that install gpuplace's cupy extras."""
    return f"pip install {pip_target('cuda12')} (CUDA 12) or {pip_target('cuda13')} (CUDA 13)"


def cupy_for(major: int) -> str:
    """The fix that installs the cupy built for CUDA `major`."""
    return f"install the cupy for CUDA {major}: pip install {pip_target(f'cuda{major}')}"


def cupy_driver_warning(
    driver_cuda: str | None, installed: Callable[[str], str | None]
) -> str | None:
    """A warning when a cupy wheel `installed` (distribution name -> version, or None) needs a
    newer CUDA major than the driver's (`driver_cuda`, e.g. "12.4"); None when it fits, when no
    cupy wheel is installed, or when the driver's version is unknown."""
    if not driver_cuda or not driver_cuda.split(".")[0].isdigit():
        return None
    driver = int(driver_cuda.split(".")[0])
    for wheel, major in CUPY_WHEELS.items():
        version = installed(wheel) if major > driver else None
        if version is not None:
            return (
                f"{wheel} {version} needs a driver for CUDA {major}, but this driver supports "
                f"CUDA {driver_cuda} at most (nvidia-smi's 'CUDA Version'): run and devices "
                f"--check will fail on these GPUs; {cupy_for(driver)} (and uninstall {wheel}), "
                "or update the driver"
            )
    return None


def installed_version(name: str) -> str | None:
    """The installed version of distribution `name`, or None (importlib.metadata, no import)."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
