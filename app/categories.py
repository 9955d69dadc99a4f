"""The nine fixed categories of the knowledge base."""

from __future__ import annotations

CATEGORIES: dict[str, tuple[str, str]] = {
    "cuda": ("CUDA and GPUs", "Out of memory, device-side asserts, drivers, kernels and cuDNN."),
    "mismatch": (
        "Shape, dtype and device mismatches",
        "Tensors that disagree on shape, dtype, device or layout.",
    ),
    "version": ("Version changes", "APIs that changed or were removed between PyTorch releases."),
    "data": ("Data loading", "Datasets, DataLoader workers, shared memory and input pipelines."),
    "loading": ("Saving and loading", "Checkpoints, state_dict keys, map_location and torch.load."),
    "loss": ("Losses and autograd", "NaN losses, wrong targets, and gradients that break."),
    "parallel": ("Parallel and distributed", "DataParallel, DDP, process groups and multiprocessing."),
    "optim": ("Optimisation and training", "Optimisers, schedulers, train/eval modes and reproducibility."),
    "onnx": ("Export and quantisation", "ONNX export, opsets and quantised models."),
}
