"""Can this machine meet an entry's requirements? Never initialises CUDA (safe before a fork)."""

from __future__ import annotations

import importlib.util
import os

from .contracts import Requires


def gpu_count() -> int:
    """Visible CUDA devices; `device_count` uses NVML and leaves CUDA uninitialised."""
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    import torch

    try:
        built = torch.backends.cuda.is_built()  # type: ignore[no-untyped-call]  # unannotated in torch
        return torch.cuda.device_count() if built else 0
    except Exception:  # noqa: BLE001
        return 0


def unmet(requires: Requires, *, gpus: int | None = None) -> str | None:
    """The reason this machine can't run an entry, or None when it can."""
    need = max(int(requires.get("gpus") or 0), 1 if requires.get("cuda") else 0)
    if need:
        have = gpu_count() if gpus is None else gpus
        if have < need:
            return f"needs {need} CUDA GPU{'s' if need > 1 else ''}, this worker has {have}"
    missing = [p for p in requires.get("packages", []) if importlib.util.find_spec(p) is None]
    if missing:
        return f"needs package{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
    return None
