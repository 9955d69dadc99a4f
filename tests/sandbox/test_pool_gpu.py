"""CUDA cases through the pool (skipped without a GPU; `bench/gpu_check.py` is the same check as a plain script)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture
def cuda(pool):
    if not pool.gpus:
        pytest.skip("needs a CUDA GPU")


def test_pool_gpu_device_mismatch(cuda, run, next_run_ok):
    out = run(
        "import torch\nprint(torch.ones(3, device='cuda') + torch.ones(3))\n",
        requires={"cuda": True},
        expect={"outcome": "raised", "exc_type": "RuntimeError", "match": "same device"},
    )
    assert out["expected"] is True, out
    assert out["device"] != "cpu"
    next_run_ok()


def test_pool_gpu_oom_is_raised(cuda, run, next_run_ok):
    out = run(
        "import torch\ntorch.empty(200 * 2**30, dtype=torch.uint8, device='cuda')\n",
        expect={"outcome": "raised", "exc_type": "OutOfMemoryError"},
    )
    assert out["expected"] is True, out
    next_run_ok()


def test_pool_gpu_device_side_assert_poisons_only_its_process(cuda, run, next_run_ok):
    code = (
        "import torch\nx = torch.randn(4, 10, device='cuda')\nt = torch.tensor([0, 1, 2, 99], device='cuda')\n"
        "loss = torch.nn.functional.cross_entropy(x, t)\nprint(loss.item())\n"
    )
    out = run(code, expect={"outcome": "raised", "exc_type": "RuntimeError", "match": "device-side assert"})
    assert out["expected"] is True, out
    assert "line 4" in out["traceback"], out["traceback"]  # CUDA_LAUNCH_BLOCKING=1
    out = run("import torch\na = torch.ones(8, 8, device='cuda')\nprint((a @ a).sum().item())\n")
    assert out["outcome"] == "ok" and out["stdout"] == "512.0\n", out
    next_run_ok()
