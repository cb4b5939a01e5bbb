"""gpuplace: see the GPUs a CUDA program would see, and place work on them as TensorFlow does.

The public API is imported lazily so that `import gpuplace` stays cheap (no numpy, no cupy).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["discover", "load_machine", "view", "visible"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import devices

        return getattr(devices, name)
    raise AttributeError(f"module 'gpuplace' has no attribute {name!r}")
