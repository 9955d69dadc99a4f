"""Search on realistic pastes: other paths, shapes, sizes, formats and wordings than the signatures."""

from __future__ import annotations

from pathlib import Path

import pytest

CONTENT = Path(__file__).resolve().parents[1] / "content"

# (paste, slug that must come first, or a tuple of entries that all explain it). Each differs from the entry's signatures in its volatile parts.
PASTES = {
    "linear-windows-traceback": (
        """Traceback (most recent call last):
  File "C:\\Users\\ana\\projects\\mnist\\train.py", line 88, in <module>
    out = model(xb)
  File "C:\\Users\\ana\\miniconda3\\envs\\t\\lib\\site-packages\\torch\\nn\\modules\\module.py", line 1751, in _call_impl
    return forward_call(*args, **kwargs)
  File "C:\\Users\\ana\\projects\\mnist\\model.py", line 21, in forward
    return self.fc(x)
RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x9216 and 4608x128)
""",
        ("linear-in-features-mismatch", "hardcoded-batch-size-last-batch"),
    ),
    "linear-old-wording": (
        "RuntimeError: size mismatch, m1: [16 x 2048], m2: [512 x 10] at /opt/conda/conda-bld/pytorch_1556653114079/work/aten/src/TH/generic/THTensorMath.cpp:961",
        "linear-in-features-mismatch",
    ),
    "view-jupyter": (
        """---------------------------------------------------------------------------
RuntimeError                              Traceback (most recent call last)
Cell In[12], line 3
      1 x = feats.transpose(1, 2)
----> 3 x.view(x.size(0), -1)

RuntimeError: view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.""",
        "view-non-contiguous",
    ),
    "view-old-wording": (
        "RuntimeError: invalid argument 2: view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces). Call .contiguous() before .view(). at /pytorch/aten/src/TH/generic/THTensor.cpp:203",
        "view-non-contiguous",
    ),
    "progress-bar-noise": (
        """Epoch 3:  37%|███▋      | 370/1000 [00:12<00:21, 29.1it/s, loss=0.231]\r
2026-11-02 10:31:07,113 INFO step=370 lr=3.0e-04 gpu_mem=11.2GiB
Traceback (most recent call last):
  File "/srv/jobs/seg/train.py", line 140, in <module>
    loss = criterion(logits, masks)
  File "/srv/jobs/seg/.venv/lib/python3.12/site-packages/torch/nn/modules/loss.py", line 1295, in forward
    return F.cross_entropy(input, target, weight=self.weight,
IndexError: Target 21 is out of bounds.
wandb: Waiting for W&B process to finish... (failed 1).""",
        "cross-entropy-target-out-of-range",
    ),
    "size-mismatch-head": (
        """RuntimeError: Error(s) in loading state_dict for EfficientNet:
	size mismatch for classifier.1.weight: copying a param with shape torch.Size([1000, 1280]) from checkpoint, the shape in current model is torch.Size([7, 1280]).
	size mismatch for classifier.1.bias: copying a param with shape torch.Size([1000]) from checkpoint, the shape in current model is torch.Size([7]).""",
        "size-mismatch-classifier-head",
    ),
    "weights-only-other-global": (
        """_pickle.UnpicklingError: Weights only load failed. This file can still be loaded, to do so you have two options, do those steps only if you trust the source of the checkpoint.
	(1) In PyTorch 2.6, we changed the default value of the `weights_only` argument in `torch.load` from `False` to `True`. Re-running `torch.load` with `weights_only` set to `False` will likely succeed, but it can result in arbitrary code execution. Do it only if you got the file from a trusted source.
	(2) Alternatively, to load with `weights_only=True` please check the recommended steps in the following error message.
	WeightsUnpickler error: Unsupported global: GLOBAL omegaconf.dictconfig.DictConfig was not an allowed global by default. Please use `torch.serialization.add_safe_globals([DictConfig])` or the `torch.serialization.safe_globals([DictConfig])` context manager to allowlist this global if you trust this class/function.""",
        "weights-only-load-failed",
    ),
    "backward-twice": (
        "RuntimeError: Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if you need to access saved tensors after calling backward.",
        "backward-graph-second-time",
    ),
    "inplace-other-version": (
        "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [torch.cuda.FloatTensor [512, 256]], which is output 0 of TBackward0, is at version 4; expected version 3 instead. Hint: enable anomaly detection to find the operation that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True).",
        "inplace-modified-needed-for-grad",
    ),
    "broadcast-other-dims": (
        """  File "/home/kim/vit/attn.py", line 57, in forward
    attn = attn + self.rel_bias
RuntimeError: The size of tensor a (197) must match the size of tensor b (196) at non-singleton dimension 3""",
        "broadcast-size-mismatch",
    ),
    "truncated-checkpoint": (
        "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory",
        "truncated-checkpoint-central-directory",
    ),
    "element-0": (
        "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn",
        "element-0-does-not-require-grad",
    ),
    "ddp-attr": (
        "AttributeError: 'DistributedDataParallel' object has no attribute 'generate'",
        "dataparallel-attribute-needs-module",
    ),
    "oom-2018": (
        "RuntimeError: CUDA out of memory. Tried to allocate 1.50 GiB (GPU 3; 10.92 GiB total capacity; 8.21 GiB already allocated; 906.38 MiB free; 8.35 GiB cached)",
        "cuda-out-of-memory",
    ),
    "oom-2026": (
        """Traceback (most recent call last):
  File "/mnt/nfs/llm/finetune.py", line 212, in <module>
    out = model(**batch)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB. GPU 1 has a total capacity of 139.80 GiB of which 412.06 MiB is free. Including non-PyTorch memory, this process has 139.38 GiB memory in use. Of the allocated memory 131.27 GiB is allocated by PyTorch, and 6.70 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)""",
        "cuda-out-of-memory",
    ),
    "device-assert-kernel-lines": (
        """/opt/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [211,0,0], thread: [64,0,0] Assertion `srcIndex < srcSelectDimSize` failed.
/opt/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [211,0,0], thread: [65,0,0] Assertion `srcIndex < srcSelectDimSize` failed.
Traceback (most recent call last):
  File "/home/li/bert/run.py", line 77, in <module>
    print(logits.argmax(-1))
RuntimeError: CUDA error: device-side assert triggered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.""",
        "device-side-assert-index-out-of-range",
    ),
    "fork-cuda-chained": (
        """Traceback (most recent call last):
  File "/usr/lib/python3.10/multiprocessing/pool.py", line 125, in worker
    result = (True, func(*args, **kwds))
  File "/work/infer.py", line 14, in predict
    x = x.to("cuda:0")
  File "/work/venv/lib/python3.10/site-packages/torch/cuda/__init__.py", line 288, in _lazy_init
    raise RuntimeError(
RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/work/infer.py", line 30, in <module>
    outs = pool.map(predict, chunks)
RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method""",
        "cuda-in-forked-subprocess",
    ),
    "process-group": (
        "ValueError: Default process group has not been initialized, please make sure to call init_process_group.",
        "default-process-group-not-initialized",
    ),
    "typed-by-hand-typos": (
        "RuntineError: Trying to bakward through the graph a secnod time (or directly access saved tensors after they have already been freed).",
        "backward-graph-second-time",
    ),
    "th-era-backend": (
        "RuntimeError: Expected object of backend CUDA but got backend CPU for argument #3 'index'",
        "tensor-created-on-wrong-device",
    ),
    "vscode-announce": (
        """发生异常: RuntimeError
one of the variables needed for gradient computation has been modified by an inplace operation: [torch.FloatTensor [3, 4]], which is output 0 of ReluBackward0, is at version 1; expected version 0 instead.
  File "D:\\code\\gan\\train.py", line 120, in <module>
    d_loss.backward()""",
        "inplace-modified-needed-for-grad",
    ),
}

UNRELATED = [
    "KeyError: 'learning_rate'",
    "ModuleNotFoundError: No module named 'transformers'",
    "ConnectionRefusedError: [Errno 111] Connection refused",
    "TypeError: unsupported operand type(s) for +: 'int' and 'str'",
    "FileNotFoundError: [Errno 2] No such file or directory: 'data/train.csv'",
    "hello world",
    "SyntaxError: invalid syntax",
    "ZeroDivisionError: division by zero",
]


def assert_answers(searcher, paste: str, slug: str) -> None:
    """The paste's first answer is `slug`, and a confident one."""
    result = searcher.search(paste)
    assert result.results[0].slug == slug and result.confident, [
        (h.slug, h.score) for h in result.results[:3]
    ]


@pytest.mark.parametrize("name", sorted(PASTES))
def test_search_paste_lands_on_entry(searcher, name):
    paste, slug = PASTES[name]
    result = searcher.search(paste)
    assert result.results, f"{name}: no results"
    assert result.results[0].slug in ((slug,) if isinstance(slug, str) else slug), (
        f"{name}: got {[(h.slug, h.score) for h in result.results[:3]]}"
    )
    assert result.confident, f"{name}: not confident ({result.results[0].score})"


@pytest.mark.parametrize("text", UNRELATED)
def test_search_unrelated_is_not_confident(searcher, text):
    result = searcher.search(text)
    assert not result.confident, [(h.slug, h.score, h.matched) for h in result.results[:3]]


def test_search_reports_ignored_parts(searcher):
    result = searcher.search(PASTES["linear-windows-traceback"][0])
    assert result.ignored.get("shape") == 2
    assert result.ignored.get("traceback frame", 0) >= 3
    assert result.lines[0].startswith("RuntimeError: mat1 and mat2")


def test_search_message_without_exception_type_ranks_its_entry_first(searcher):
    result = searcher.search(
        "Expected all tensors to be on the same device, but found at least two devices, cpu and "
        "cuda:0! (when checking argument for argument index in method wrapper_CUDA__index_select)"
    )
    assert result.results[0].slug == "tensor-created-on-wrong-device"


def test_search_truncated_paste_still_finds_its_entry(searcher):
    """A paste cut short keeps a distinctive part of the message: that is a match, if a weaker one."""
    full = searcher.search(PASTES["backward-twice"][0])
    cut = searcher.search(
        "RuntimeError: Trying to backward through the graph a second time (or directly access saved"
    )
    assert cut.results[0].slug == "backward-graph-second-time"
    assert cut.results[0].score <= full.results[0].score


def test_search_free_text_finds_entry(searcher):
    result = searcher.search("loss becomes nan")
    assert result.results and result.results[0].slug == "nan-loss"


@pytest.mark.parametrize(
    "package",
    ["kaolin", "maskrcnn_benchmark", "diff_gaussian_rasterization"],
)
def test_search_another_packages_compiled_module_is_not_torchvisions(searcher, package):
    # every package names its compiled module `_C`: an undefined symbol in kaolin's is no torchvision mismatch
    result = searcher.search(
        f"ImportError: /home/u/env/lib/python3.8/site-packages/{package}/_C.cpython-38-x86_64-linux-gnu.so: "
        "undefined symbol: _ZN3c105ErrorC1ENS_14SourceLocationESs"
    )
    assert "torchvision-torch-version-mismatch" not in [h.slug for h in result.results[:3]], [
        (h.slug, h.score) for h in result.results[:3]
    ]


@pytest.mark.parametrize(
    "symbol, causes",
    [
        # takes a std::string (either C++ ABI): the ABI flag the extension was built with
        ("_ZN3c105ErrorC1ENS_14SourceLocationESs", {"cxx11-abi-mismatch-undefined-symbol"}),
        (
            "_ZN3c106detail14torchCheckFailEPKcS2_jRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
            {"cxx11-abi-mismatch-undefined-symbol"},
        ),
        # anything else: a function this torch does not have, the extension was built against another
        (
            "_ZN3c104cuda9SetDeviceEi",
            {"prebuilt-extension-wheel-other-torch", "source-built-extension-other-torch"},
        ),
        (
            "_ZN6caffe26detail36_typeMetaDataInstance_preallocated_7E",
            {"prebuilt-extension-wheel-other-torch", "source-built-extension-other-torch"},
        ),
        # in another library's namespace (`tbb::detail::r1::deallocate_memory`): that library's runtime
        ("_ZN3tbb6detail2r117deallocate_memoryEPv", {"extension-needs-onetbb-runtime"}),
    ],
)
def test_search_what_the_missing_symbol_is_tells_abi_from_version(searcher, symbol, causes):
    # an extension no signature names: only the symbol says which cause it is
    result = searcher.search(
        f"ImportError: /home/u/proj/ops/_ext.cpython-38-x86_64-linux-gnu.so: undefined symbol: {symbol}"
    )
    ranked = [(h.slug, h.score) for h in result.results[:3]]
    assert ranked[0][0] in causes, ranked


def test_search_a_checkpoints_own_dict_loaded_as_weights_is_told_by_its_keys(searcher):
    # every cause of a failed load_state_dict prints the same words; keys without dots left over
    # (`epoch`, `optimizer`) are a checkpoint dict passed whole, whatever the model's own keys are
    result = searcher.search(
        "RuntimeError: Error(s) in loading state_dict for SegNet:\n"
        '\tMissing key(s) in state_dict: "encoder.stem.conv.weight", "encoder.stem.bn.weight".\n'
        '\tUnexpected key(s) in state_dict: "epoch", "best_miou", "model", "optim".'
    )
    ranked = [(h.slug, h.score) for h in result.results[:3]]
    assert ranked[0][0] == "checkpoint-dict-passed-to-load-state-dict", ranked


@pytest.mark.parametrize(
    "input_type, weight_type, slug, other",
    [
        ("torch.cuda.FloatTensor", "torch.FloatTensor", "cuda-input-cpu-model", "tensor-cuda-returns-copy"),
        ("torch.FloatTensor", "torch.cuda.FloatTensor", "tensor-cuda-returns-copy", "cuda-input-cpu-model"),
    ],
)
def test_search_the_side_left_on_the_cpu_picks_the_cause(searcher, input_type, weight_type, slug, other):
    result = searcher.search(
        f"RuntimeError: Input type ({input_type}) and weight type ({weight_type}) should be the same"
    )
    ranked = [(h.slug, h.score) for h in result.results[:3]]
    assert result.confident and ranked[0][0] == slug, ranked
    assert other not in [s for s, _ in ranked], ranked


@pytest.mark.parametrize(
    "paste, slugs",
    [
        # the argument's name ('exponent') is the dtype entry's, the types say a tensor left on the CPU
        (
            "RuntimeError: Expected object of type torch.cuda.FloatTensor but found type torch.FloatTensor "
            "for argument #2 'exponent'",
            {"tensor-created-on-wrong-device"},
        ),
        # the argument's name ('mat2') is the device entry's, the types say two dtypes on one GPU
        (
            "RuntimeError: Expected object of type torch.cuda.LongTensor but found type torch.cuda.FloatTensor "
            "for argument #2 'mat2'",
            {"old-torch-no-type-promotion", "double-input-float-weights"},
        ),
    ],
)
def test_search_how_two_tensor_types_differ_picks_the_cause(searcher, paste, slugs):
    result = searcher.search(paste)
    ranked = [(h.slug, h.score) for h in result.results[:3]]
    assert ranked[0][0] in slugs, ranked


def test_search_library_file_named_in_the_paste_decides(searcher):
    # an extension's `undefined symbol` is not torchaudio's or torchvision's, though the words are the same
    result = searcher.search(
        "OSError: /opt/env/lib/python3.11/site-packages/torch_scatter/_version_cuda.so: "
        "undefined symbol: _ZN3c104cuda9SetDeviceEi"
    )
    assert result.results[0].slug == "prebuilt-extension-wheel-other-torch", [
        (h.slug, h.score) for h in result.results[:3]
    ]


DEVICE_MESSAGE = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
DEVICE_CAUSES = {
    "tensor-created-on-wrong-device",
    "optimizer-state-on-cpu-after-resume",
    "register-buffer-for-state",
}


@pytest.mark.parametrize(
    "paste",
    [
        DEVICE_MESSAGE,
        DEVICE_MESSAGE.replace(
            "cuda:0 and cpu!",
            "cpu and cuda:0! (when "
            "checking argument for argument index in method wrapper_CUDA__index_select)",
        ),
    ],
)
def test_search_one_message_several_causes_nothing_to_choose_gets_the_hub_that_lists_them(searcher, paste):
    # the message alone fits three causes equally: they are shown side by side, and the entry that
    # lists the message's causes (linking the others) is the answer, not an abstention between it
    # and the causes it links
    result = searcher.search(paste)
    assert {h.slug for h in result.results[:3]} == DEVICE_CAUSES
    assert result.results[0].slug == "tensor-created-on-wrong-device"
    assert result.results[0].score == result.results[1].score
    assert result.confident


def test_search_the_hub_for_a_message_stays_among_the_first_three(searcher):
    # missing keys favour a few specific causes, none clearly: the entry listing every cause of
    # the message must stay in sight for a reader whose case is another one
    result = searcher.search("""Traceback (most recent call last):
  File "eval.py", line 62, in <module>
    net.load_state_dict(weight)
  File "/usr/lib/python3.8/site-packages/torch/nn/modules/module.py", line 1045, in load_state_dict
    self.__class__.__name__, "\\n\\t".join(error_msgs)))
RuntimeError: Error(s) in loading state_dict for ResNet:
\tMissing key(s) in state_dict: "layer1.0.conv3.weight", "layer1.0.bn3.weight", "layer1.0.bn3.bias", "layer1.0.bn3.running_mean",
""")
    slugs = [h.slug for h in result.results]
    assert slugs.index("load-state-dict-missing-unexpected-keys") < 3 < len(slugs)
    assert not result.confident


def test_search_one_message_several_causes_the_rest_of_the_paste_decides(searcher):
    result = searcher.search(f"""Resuming from checkpoint epoch 12
Traceback (most recent call last):
  File "train.py", line 210, in <module>
    optimizer.step()
  File "/opt/conda/lib/python3.11/site-packages/torch/optim/adam.py", line 166, in step
    adam(params_with_grad,
{DEVICE_MESSAGE}""")
    assert result.results[0].slug == "optimizer-state-on-cpu-after-resume"
    assert result.confident


@pytest.mark.parametrize(
    "paste, slug",
    [
        (
            "On my M1 Mac the script stops with MPS not available because the current PyTorch install was not built "
            "with MPS enabled. What should I install?",
            "mps-not-available",
        ),
        (
            "after upgrading, training fails with: query should be unbatched 2D or batched 3D tensor but received 4-D "
            "query tensor (any idea?)",
            "multihead-attention-input-rank",
        ),
    ],
)
def test_search_whole_message_inside_a_sentence_is_confident(searcher, paste, slug):
    # the user's words around a complete, distinctive message do not make it another error
    assert_answers(searcher, paste, slug)


def test_search_a_warning_pasted_with_the_error_does_not_unsettle_it(searcher):
    result = searcher.search("""/opt/conda/lib/python3.11/site-packages/torch/functional.py:513: UserWarning: torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument. (Triggered internally at ../aten/src/ATen/native/TensorShape.cpp:3609.)
  return _VF.meshgrid(tensors, **kwargs)  # type: ignore[attr-defined]
Traceback (most recent call last):
  File "train.py", line 12, in <module>
    y = model(x)
RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x9216 and 4608x128)""")
    assert result.results[0].slug in ("linear-in-features-mismatch", "hardcoded-batch-size-last-batch")
    assert result.confident


def test_search_a_word_or_two_beyond_the_error_line_do_not_pick_the_cause(searcher):
    # "raise" in the frame is all the paste says besides the message: the entry named for the message wins
    result = searcher.search("""  File "/usr/lib/python3/dist-packages/torch/cuda/__init__.py", line 310, in _lazy_init
    raise AssertionError("Torch not compiled with CUDA enabled")
AssertionError: Torch not compiled with CUDA enabled""")
    assert result.results[0].slug == "cuda-not-available-cpu-wheel"
    assert result.confident


def test_search_short_signature_with_a_topic_word_can_be_confident(searcher):
    # "DGL" is in a dozen signatures, all of three entries: a topic word, not a common one
    result = searcher.search("RuntimeError: DGL requires PyTorch >= 1.13.0")
    assert result.confident and result.results[0].slug == "dgl-built-for-other-torch"


def test_search_short_message_whose_words_only_one_entry_holds_can_be_confident(searcher):
    # "invalid", "buffer" and "size" are each common; together they are only MPS's allocation limit
    result = searcher.search("RuntimeError: Invalid buffer size: 635.13 GB")
    assert result.confident and result.results[0].slug == "mps-invalid-buffer-size"


@pytest.mark.parametrize(
    "paste", ["RuntimeError: size mismatch", "RuntimeError: Unknown type name '__torch__.Net'"]
)
def test_search_short_message_several_entries_share_stays_unsure(searcher, paste):
    result = searcher.search(paste)
    assert not result.confident, [(h.slug, h.score) for h in result.results[:3]]


def test_search_prose_line_does_not_crowd_out_the_error_lines_candidates(searcher):
    # the sentence's common words ("cuda error") must not push the short exact signature out
    alone = searcher.search("RuntimeError: CUDNN_STATUS_EXECUTION_FAILED")
    with_prose = searcher.search(
        "RuntimeError: CUDNN_STATUS_EXECUTION_FAILED\nwhen i run python demo.py, i got cuda error."
    )
    assert alone.confident and with_prose.confident
    assert with_prose.results[0].slug == alone.results[0].slug == "cudnn-status-execution-failed"


def test_search_without_some_entries_never_returns_them(searcher):
    # the evaluation's "answer hidden" figure: what a paste gets when its entry is missing
    text = "RuntimeError: CUDNN_STATUS_EXECUTION_FAILED"
    assert searcher.search(text).results[0].slug == "cudnn-status-execution-failed"
    hidden = searcher.search(text, hide=frozenset({"cudnn-status-execution-failed"}))
    assert "cudnn-status-execution-failed" not in [h.slug for h in hidden.results]


def test_a_hubs_links_to_other_causes_are_not_its_own_words():
    # a hub entry lists the message's other causes with links to their entries; the words of those
    # lines describe the linked entries, so they must not pull a tie towards the hub
    from app.search import own_words

    hub = (
        "The tensors of one operation live on different devices.\n"
        "- A tensor made inside `forward` with no `device=`: create it on `x.device`.\n"
        "- Optimizer state restored onto the CPU after resuming: "
        "[Optimizer state on CPU](/e/optimizer-state-on-cpu-after-resume).\n"
    )
    words = own_words(hub)
    assert {"devices", "forward", "device"} <= words
    assert not {"optimizer", "resuming", "restored"} & words


@pytest.mark.parametrize(
    "paste",
    [
        "ValueError: too many values to unpack (expected 2)",
        "TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'",
        "TypeError: 'NoneType' object is not subscriptable",
        "TypeError: object of type 'SpeechDataset' has no len()",
        # (the whole of Python's wording: "or slices" is the template too)
        "TypeError: tuple indices must be integers or slices, not tuple",
    ],
)
def test_python_own_message_template_alone_is_not_confident(searcher, paste):
    # Python raises these for any code; an entry whose signature holds one (around its own code or
    # names) is a guess for a paste that shares nothing else with it
    result = searcher.search(paste)
    assert result.results and not result.confident


@pytest.mark.parametrize(
    "module",
    ["torch._dynamo", "torch.ao.quantization", "torchvision.trasnforms", "utils", "torch.utils", "tools"],
)
def test_a_missing_module_is_not_another_module_of_its_name(searcher, module):
    # "No module named 'torch'" is a Python without torch; "... named 'torch._dynamo'" is a torch without
    # that module (too old, or a typo). Nor is "... named 'utils'" (a repository's own folder) "... named
    # 'torch.utils.serialization'", or a package missing whole one of its submodules missing. With the
    # entries that name the module itself hidden, no entry is a confident answer
    naming = frozenset(
        p.stem for p in CONTENT.glob("*/*.toml") if f"named '{module}'" in p.read_text(encoding="utf-8")
    )
    result = searcher.search(f"ModuleNotFoundError: No module named '{module}'", hide=naming)
    assert not result.confident, [(h.slug, h.score, h.matched) for h in result.results[:3]]
    # the package itself, and a module an entry names, stay confident
    assert searcher.search("ModuleNotFoundError: No module named 'torch'").confident
    assert searcher.search("ModuleNotFoundError: No module named 'torch._six'").confident
    # and Python 2 named the module by its last part alone
    assert_answers(
        searcher, "ImportError: No module named serialization", "load-lua-torch-utils-serialization-removed"
    )


def test_prose_around_a_message_of_common_words_leaves_its_entry_in_reach(searcher):
    # every word of "shape '[...]' is invalid for input of size N" is common to dozens of signatures:
    # with the paste's sentences each taking an equal share of the postings budget, the error line's
    # rarest-first gathering stopped before it reached the entry for the message itself
    paste = """Hello, thanks for sharing the code.
I hit a problem when the validation step starts after the first epoch.
  File "/repo/models/blocks.py", line 120, in forward
    tiles = split_tiles(feature, self.tile)
  File "/repo/models/blocks.py", line 31, in split_tiles
    x = x.view(B, H // t, t, W // t, t, C)
RuntimeError: shape '[1, 75, 8, 93, 8, 96]' is invalid for input of size 34560000
Could you tell me how to fix it?"""
    assert_answers(searcher, paste, "view-shape-invalid-for-input-size")


def test_python_template_with_the_names_that_decide_stays_confident(searcher):
    result = searcher.search("TypeError: __init__() got an unexpected keyword argument 'gpus'")
    assert result.confident and result.results[0].slug == "lightning-removed-trainer-api"
    result = searcher.search("TypeError: forward() takes 2 positional arguments but 3 were given")
    assert result.confident and result.results[0].slug == "forward-wrong-number-of-arguments"


@pytest.mark.parametrize(
    "paste, slug",
    [
        (
            "ERROR: Could not find a version that satisfies the requirement torch (from versions: none)",
            "no-matching-distribution-torch",
        ),
        (
            "ERROR: Could not find a version that satisfies the requirement triton (from versions: none)",
            "compile-triton-missing",
        ),
    ],
)
def test_the_package_pip_could_not_find_decides(searcher, paste, slug):
    # pip's message is the same for every package: the package named is what tells the entries apart
    result = searcher.search(paste)
    assert result.confident and result.results[0].slug == slug
    assert result.results[1].score < 0.8


@pytest.mark.parametrize(
    "code, message, slug",
    [
        ("1455", "页面文件太小，无法完成操作。", "windows-paging-file-too-small"),
        ("126", "找不到指定的模块。", "windows-dll-load-failed-c10"),
        ("1114", "动态链接库(DLL)初始化例程失败。", "windows-winerror-1114-dll-init-failed"),
    ],
)
def test_the_windows_error_code_decides_in_any_language(searcher, code, message, slug):
    # a localized Windows prints its own words around the same code: the code is what names the error
    paste = (
        f"OSError: [WinError {code}] {message} Error loading "
        '"D:\\python\\lib\\site-packages\\torch\\lib\\cudnn_adv_infer64_8.dll" or one of its dependencies.'
    )
    assert_answers(searcher, paste, slug)


@pytest.mark.parametrize(
    "paste, slug",
    [
        (
            "RuntimeError: expected scalar type Half but found Float error when trying to train LoRa on llama",
            "half-float-mixed-scalar-type",
        ),
        # without its `RuntimeError:` too
        (
            "CUDA error: an illegal memory access was encountered when I train with a batch of 64",
            "illegal-memory-access-async",
        ),
        # after a sentence of the user's, at the end of the line
        (
            "After upgrading the driver my script stopped working and now prints the error: CUDA error: "
            "no kernel image is available for execution on the device",
            "no-kernel-image-arch-mismatch",
        ),
        # cut short after its distinctive words: by a log viewer's width
        (
            "RuntimeError: Trying to backward through the graph a second time (or directly access saved",
            "backward-graph-second-time",
        ),
        # cut before the words that would make it long enough to stand on word overlap alone
        ("RuntimeError: CUDA error: no kernel image is available for", "no-kernel-image-arch-mismatch"),
        # cut inside a word, and without its exception type
        (
            "one of the variables needed for gradient computation has been modified by an inpl",
            "inplace-modified-needed-for-grad",
        ),
        # short, but its one word is rare: still that message
        (
            "RuntimeError: CUDNN_STATUS_BAD_PARAM when I run inference on the second batch",
            "cudnn-status-bad-param",
        ),
    ],
)
def test_a_message_among_the_users_words_or_cut_short_is_that_message(searcher, paste, slug):
    # titles and one-line reports run the message into a sentence on the same line, or end one with
    # it; log viewers and titles cut it short
    result = searcher.search(paste)
    assert result.confident and result.results[0].slug == slug


@pytest.mark.parametrize(
    "paste",
    [
        # the message goes on with its values: a signature cut before them is no better a match
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 2.00 GiB total capacity; "
        "939.96 MiB already allocated; 0 bytes free; 962.00 MiB reserved in total by PyTorch)",
        # another name after a template cut before its name: not the template's own entry
        "AttributeError: module 'torch' has no attribute 'hann_windowz' when I run the demo",
        # another error's line, with a second message run into it: neither is said whole in prose
        "AttributeError: 'Namespace' object has no attribute 'epochs' Could not load dynamic library "
        "'libcudart.so.10.0'; dlerror: libcudart.so.10.0: cannot open shared object file: No such file or directory",
        # a signature that is an exception type and a quoted string: the string is all it says
        "TypeError: __init__() takes exactly 1 argument (2 given) when I build the trainer",
    ],
)
def test_what_follows_a_cut_signature_is_not_taken_for_prose(searcher, paste):
    result = searcher.search(paste)
    assert not (result.confident and result.results[0].slug != "cuda-out-of-memory")


@pytest.mark.parametrize(
    "key, slug",
    [
        ("<", "html-page-saved-as-checkpoint"),
        ("v", "git-lfs-pointer-invalid-load-key"),
        ("?", "invalid-load-key-not-a-checkpoint"),
    ],
)
def test_the_quoted_byte_decides_which_file_was_loaded(searcher, key, slug):
    # '<' is an HTML page, 'v' a Git LFS pointer, any other byte another kind of file: a quoted
    # symbol is a name like any other
    assert_answers(searcher, f"_pickle.UnpicklingError: invalid load key, '{key}'.", slug)


def test_a_warning_matched_whole_does_not_outrank_the_error_cut_short(searcher):
    # the error line is half-copied, the warning above it is a signature word for word: the paste is
    # still about the error
    paste = (
        "train.py:41: UserWarning: nn.init.uniform is now deprecated in favor of nn.init.uniform_.\n"
        "  nn.init.uniform(m.weight, -0.01, 0.01)\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 88, in <module>\n'
        "    total += loss.data[0]\n"
        "IndexError: invalid index of a 0-dim tensor. Use tensor.item"
    )
    assert searcher.search(paste).results[0].slug == "loss-data-index-0-dim-tensor"


@pytest.mark.parametrize(
    "paste",
    [
        # a header whose point is on the lines below it
        "RuntimeError: Error(s) in loading state_dict for UNet3D:",
        # the words every such message starts with: no particular one yet
        "RuntimeError: The size of tensor a",
        # cut before the part that tells two messages apart (a device, or a dtype, mismatch)
        "RuntimeError: Input type (torch.cuda.FloatTensor) and weight type",
    ],
)
def test_the_start_of_many_messages_is_none_of_them(searcher, paste):
    assert not searcher.search(paste).confident


def test_a_line_that_is_a_whole_signature_is_found_among_many_alike(searcher):
    # dozens of signatures share "ModuleNotFoundError: No module named" and its quoted name equally;
    # the one the line holds whole must be among those rescored, whatever else the paste says
    paste = (
        'File "C:\\\\Users\\\\kai\\\\tools\\\\faceapp\\\\launch.py", line 3, in <module>\n'
        "    from faceapp import core\n"
        '  File "C:\\\\Users\\\\kai\\\\tools\\\\faceapp\\\\faceapp\\\\core.py", line 9, in <module>\n'
        "    import torch\n"
        "ModuleNotFoundError: No module named 'torch'\n\n"
        "I get this every time I start the app from the installer and I don't know what it means.\n"
        "Windows 11, NVIDIA card."
    )
    result = searcher.search(paste)
    assert result.results[0].slug == "no-module-named-torch-wrong-interpreter"


def test_a_size_mismatch_naming_another_models_parameters_is_still_that_message(searcher):
    # the keys (`encoder.layer.0...weight`) are the paste's model's own, not the signature's `fc.bias`
    paste = (
        "RuntimeError: Error(s) in loading state_dict for BertForSequenceClassification:\n"
        "\tsize mismatch for bert.encoder.layer.0.attention.self.query.weight: copying a param with shape "
        "torch.Size([1024, 1024]) from checkpoint, the shape in current model is torch.Size([768, 768]).\n"
        "\tsize mismatch for bert.encoder.layer.0.attention.self.query.bias: copying a param with shape "
        "torch.Size([1024]) from checkpoint, the shape in current model is torch.Size([768])."
    )
    result = searcher.search(paste)
    assert result.confident and result.results[0].slug == "size-mismatch-classifier-head"


def test_a_rare_word_is_found_however_many_common_words_surround_it(searcher):
    # the user's sentence shares many words with many signatures; CUDNN_STATUS_EXECUTION_FAILED,
    # in only a few, is the one that matters
    paste = (
        "RuntimeError: CUDNN_STATUS_EXECUTION_FAILED , maybe the version of python,pytorch,cuda is not "
        "compatible, this is the version i use: pytorch 1.0 cuda 9.0 gpu rtx 2080"
    )
    assert searcher.search(paste).results[0].slug == "cudnn-status-execution-failed"


def test_an_example_value_a_tied_signature_happens_to_share_does_not_pick_the_cause(searcher):
    # `[Rank 0]` is in the rank-0 entry's signature by way of example; in this paste it is only the rank
    # that printed first and says nothing of a collective entered by rank 0 alone, so the match it adds
    # must not outweigh the rest of the paste (which is about the watchdog timeout itself)
    result = searcher.search("""Training hangs for ten minutes at the same step on all 8 GPUs, then every rank is aborted by the NCCL watchdog:
[rank0]:[E1102 11:20:31.512 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600021 milliseconds before timing out.
[rank0]:[E1102 11:20:31.513 ProcessGroupNCCL.cpp:1664] To avoid data inconsistency, we are taking the entire process down.""")
    tied = {h.slug for h in result.results[:2]}
    assert tied == {"all-reduce-only-on-rank-0", "nccl-watchdog-collective-timeout"}
    assert not (result.confident and result.results[0].slug == "all-reduce-only-on-rank-0")


def test_a_warning_echoed_with_its_source_line_counts_as_one_line_of_the_paste(searcher):
    # each warning below is printed with the line that raised it, which the picker reads as a second
    # variant of the same paste line; variants must not use up the lines that gather candidates
    result = searcher.search("""/data/GroundingDINO/groundingdino/models/GroundingDINO/ms_deform_attn.py:31: UserWarning: Failed to load custom C++ ops. Running on CPU mode Only!
  warnings.warn("Failed to load custom C++ ops. Running on CPU mode Only!")
/usr/local/lib/python3.8/dist-packages/torch/functional.py:507: UserWarning: torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument. (Triggered internally at ../aten/src/ATen/native/TensorShape.cpp:3549.)
  return _VF.meshgrid(tensors, **kwargs)  # type: ignore[attr-defined]
/usr/local/lib/python3.8/dist-packages/transformers/modeling_utils.py:962: FutureWarning: The `device` argument is deprecated and will be removed in v5 of Transformers.
  warnings.warn(""")
    assert "groundingdino-c-ops-not-built" in [h.slug for h in result.results[:3]]


def test_the_error_a_wrapper_reports_is_the_answer_not_the_wrapper(searcher):
    # TorchScript reports a failed operation, then the error inside it: the inner error is the question,
    # and the wrapper's own entry, matched on the line above it, is no rival to it
    result = searcher.search("""Traceback (most recent call last):
  File "run.py", line 40, in <module>
    out = model(x)
RuntimeError: The following operation failed in the TorchScript interpreter.
Traceback of TorchScript (most recent call last):
  File "<string>", line 12, in forward
RuntimeError: nvrtc: error: invalid value for --gpu-architecture (-arch)""")
    assert result.results[0].slug == "nvrtc-invalid-gpu-architecture"
    assert result.confident, [(h.slug, h.score) for h in result.results[:3]]


def test_search_the_sizes_in_an_error_line_help_order_tied_causes(searcher):
    # every cause of this message prints the same words; the sizes differ: 512 against 544 is a
    # tokenizer's maximum length against a longer sequence (the seq2seq entry says so), not a batch
    # flattened the wrong way. One- and two-digit numbers stay out: they say nothing of the cause.
    result = searcher.search("ValueError: Expected input batch_size (544) to match target batch_size (512).")
    ranked = [(h.slug, h.score) for h in result.results[:3]]
    assert ranked[0][0] == "seq2seq-loss-batch-size-length-mismatch", ranked


@pytest.mark.parametrize(
    "paste, slug",
    [
        # torch.hub names the entry point unquoted: the user's model name stands where the signature has its own
        ("RuntimeError: Cannot find callable resnet50_v2_ssl in hubconf", "torch-hub-repo-ref-and-cache"),
        ("RuntimeError: Cannot find callable dinov2_vitb14_lc in hubconf", "torch-hub-repo-ref-and-cache"),
    ],
)
def test_the_users_own_name_in_an_unquoted_slot_is_that_message(searcher, paste, slug):
    result = searcher.search(paste)
    assert result.confident and result.results[0].slug == slug, [
        (h.slug, h.score) for h in result.results[:3]
    ]


def test_a_plain_word_in_a_templates_slot_is_another_message(searcher):
    # "can only join a started process" is Python's check before a process ever ran, not the forked
    # DataLoader iterator's "can only join a child process": one word apart, another cause
    result = searcher.search("AssertionError: can only join a started process")
    assert not result.confident


EMPTY_CHECKPOINT = """Traceback (most recent call last):
  File "train.py", line 88, in <module>
    ckpt = torch.load(args.resume)
  File "/opt/conda/lib/python3.10/site-packages/torch/serialization.py", line 1258, in _legacy_load
    magic_number = pickle_module.load(f, **pickle_load_args)
EOFError: Ran out of input"""


def test_the_source_line_that_raised_a_bare_python_error_says_which(searcher):
    # "EOFError: Ran out of input" alone has many causes; raised by torch.load's first unpickle, it is
    # an empty or cut checkpoint
    assert not searcher.search("EOFError: Ran out of input").confident
    result = searcher.search(EMPTY_CHECKPOINT)
    assert result.confident and result.results[0].slug == "empty-checkpoint-ran-out-of-input"


def test_a_source_line_alone_makes_no_match(searcher):
    # `from torch._C import *` stands above every error importing torch can raise: an unrelated
    # library's missing symbol under it is no DLL or torch._C problem
    paste = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/site-packages/torch/__init__.py", line 237, in <module>\n'
        "    from torch._C import *  # noqa: F403\n"
        "ImportError: /usr/lib/libfoo.so.1: undefined symbol: _ZN3foo3barEv"
    )
    result = searcher.search(paste)
    assert not result.confident, [(h.slug, h.score) for h in result.results[:3]]


def test_the_source_line_decides_and_the_error_line_says_the_rest(searcher):
    # the signature is timm's raise line and its message; the paste's message names another model, so
    # the error line alone is only a part of it, and the raise line above it is the rest
    paste = (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.8/site-packages/timm/models/factory.py", line 57, in create_model\n'
        "    raise RuntimeError('Unknown model (%s)' % model_name)\n"
        "RuntimeError: Unknown model (convnext_tiny_hnf)"
    )
    result = searcher.search(paste)
    assert result.confident and result.results[0].slug == "timm-unknown-model"


def test_a_wrappers_report_of_an_error_is_not_that_error_raised_alone(searcher):
    # Inductor re-raises what failed inside it as `InductorError: IndexError: ...`; a plain IndexError
    # with the same words was raised by the user's own code
    plain = searcher.search("IndexError: tuple index out of range")
    assert not plain.results or plain.results[0].slug != "inductor-error-wrapper"
    wrapped = searcher.search("torch._inductor.exc.InductorError: IndexError: tuple index out of range")
    assert wrapped.confident and wrapped.results[0].slug == "inductor-error-wrapper"


def test_a_short_signature_said_whole_is_a_candidate_however_common_its_words():
    # candidates are gathered from a line's rarest words first, within a budget of postings: a line
    # whose rarest words fill that budget never reaches "cuda error out of memory", whose words every
    # other signature holds. A signature the line holds word for word is a candidate all the same.
    from app.normalize import normalize
    from app.search import QueryLine, SignatureIndex

    common = "runtimeerror cuda error out of memory"
    rows = [(1, common, "")]
    rows += [(sid, f"{common} while filler{sid}", "") for sid in range(2, 6000)]
    rows += [(sid, f"laptop epoch word{sid}", "") for sid in range(6000, 6100)]
    index = SignatureIndex(rows)
    line = "then on my laptop at the second epoch it will report CUDA error: out of memory"
    q = QueryLine(line, 1.0, normalize(line), index)
    assert 1 in index.candidates([q])


@pytest.mark.parametrize("module", ["numpy", "transformers"])
def test_the_same_attribute_missing_from_another_module_is_another_error(searcher, module):
    # torch without `__version__` is a namespace package; another module without it says nothing of torch
    result = searcher.search(f"AttributeError: module '{module}' has no attribute '__version__'")
    assert not result.confident, [(h.slug, h.score, h.matched) for h in result.results[:3]]
    # a module inside the one a signature names (`torch.amp` under "module 'torch' has no attribute
    # 'amp'") is the same error, and so is another attribute missing from the same module
    for paste in (
        "AttributeError: module 'torch.amp' has no attribute 'custom_fwd'",
        "AttributeError: module 'torch' has no attribute '__version__'",
    ):
        assert searcher.search(paste).confident, paste


@pytest.mark.parametrize("called", ["new", "Learner.new", "__call__", "collate"])
def test_a_call_template_naming_another_function_is_another_error(searcher, called):
    # in Python's call templates the function named is the point: `new() missing 1 required positional
    # argument: 'x'` is not a module's `forward()`, however alike the argument it lacks
    paste = f"TypeError: {called}() missing 1 required positional argument: 'x'"
    result = searcher.search(paste)
    assert not (result.confident and result.results[0].slug == "forward-wrong-number-of-arguments"), [
        (h.slug, h.score, h.matched) for h in result.results[:3]
    ]
    # the same function, however qualified, is the same error
    for paste in (
        "TypeError: MyNet.forward() missing 1 required positional argument: 'x'",
        "TypeError: forward() missing 1 required positional argument: 'src'",
        "TypeError: forward() missing 1 required positional argument: 'x'",
    ):
        assert searcher.search(paste).results[0].slug == "forward-wrong-number-of-arguments", paste
        assert searcher.search(paste).confident, paste
    # and so is a dunder that Markdown rendered as a bold name (`__init__()` as `init()`)
    paste = "TypeError: TrainingArguments.init() got an unexpected keyword argument 'evaluation_strategy'"
    result = searcher.search(paste)
    assert result.confident and result.results[0].slug == "hf-library-older-or-newer-than-script"


@pytest.mark.parametrize("signal", ["Bus error", "Aborted", "Illegal instruction"])
def test_which_signal_killed_a_worker_decides(searcher, signal):
    # `Killed` is the OOM killer, `Bus error` a full /dev/shm, `Illegal instruction` a CPU without
    # AVX: with the entries that name this signal hidden, the OOM entry is no confident answer
    naming = frozenset(
        p.stem for p in CONTENT.glob("*/*.toml") if f"signal: {signal}" in p.read_text(encoding="utf-8")
    )
    paste = f"RuntimeError: DataLoader worker (pid 4242) is killed by signal: {signal}."
    result = searcher.search(paste, hide=naming)
    assert not result.confident, [(h.slug, h.score, h.matched) for h in result.results[:3]]
    # and with them, the entry that names it answers
    assert searcher.search(paste).results[0].slug in naming


@pytest.mark.parametrize(
    ("paste", "slug"),
    [
        # the old wording, fewer dimensions than the weight: the batch axis is missing
        (
            "RuntimeError: Expected 4-dimensional input for 4-dimensional weight [32, 3, 5, 5], but got "
            "3-dimensional input of size [3, 128, 128] instead",
            "conv-input-missing-batch-dim",
        ),
        # ... and more: an extra axis (a clip fed to a 2-D conv)
        (
            "RuntimeError: Expected 4-dimensional input for 4-dimensional weight [16, 1, 3, 3], but got "
            "5-dimensional input of size [4, 10, 1, 96, 96] instead",
            "conv-input-extra-dimension",
        ),
        # the new wording names no dimension count for the input: its size says it
        (
            "RuntimeError: Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: "
            "[4, 10, 3, 96, 96]",
            "conv-input-extra-dimension",
        ),
        (
            "RuntimeError: Expected 5-dimensional input for 5-dimensional weight [32, 3, 3, 7, 7], but got "
            "4-dimensional input of size [4, 3, 112, 112] instead",
            "conv3d-input-missing-time-dimension",
        ),
    ],
)
def test_a_convolution_given_fewer_or_more_dimensions_is_answered_by_its_cause(searcher, paste, slug):
    # both directions read the same but for small numbers: which way the input is off decides
    assert_answers(searcher, paste, slug)


@pytest.mark.parametrize(
    ("sig", "line", "differ"),
    [
        ({"sd:wrapper"}, {"sd:prefix"}, True),  # one family, two kinds
        ({"sd:wrapper"}, {"sd:wrapper", "sm:other"}, False),
        # a key list's shape says nothing against a size mismatch's shapes, nor the other way
        ({"sd:prefix"}, {"sm:other"}, False),
        ({"sm:packed"}, {"sm:other"}, True),
        (set(), {"sm:other"}, False),
    ],
)
def test_kinds_veto_only_within_their_family(sig, line, differ):
    from app.search import _kinds_differ

    assert _kinds_differ(frozenset(sig), line) is differ


@pytest.mark.parametrize(
    ("model", "current", "slug"),
    [
        # a base loaded in 4 bits: the projector's weight is packed into one column
        ("LlavaMistralForCausalLM", "2097152, 1", "bnb-4bit-packed-param-size-mismatch-load-state-dict"),
        # the same model class and words, an unquantized layer of another size
        ("LlavaMistralForCausalLM", "4096, 2048", "size-mismatch-classifier-head"),
    ],
)
def test_a_size_mismatch_is_answered_by_what_its_shapes_say(searcher, model, current, slug):
    paste = (
        f"RuntimeError: Error(s) in loading state_dict for {model}:\n\tsize mismatch for "
        "model.mm_projector.weight: copying a param with shape torch.Size([4096, 1024]) from checkpoint, "
        f"the shape in current model is torch.Size([{current}])."
    )
    assert searcher.search(paste).results[0].slug == slug


def test_the_system_a_pastes_paths_show_breaks_a_tie(searcher):
    # "Torch not compiled with CUDA enabled" has several causes; paths under /Users/ say macOS, where
    # the cause is code that hard-codes CUDA, though the paste never names the system
    paste = """Traceback (most recent call last):
  File "/Users/ana/projects/tts/app.py", line 12, in <module>
    model = model.to("cuda")
  File "/Users/ana/projects/tts/.venv/lib/python3.11/site-packages/torch/cuda/__init__.py", line 310, in _lazy_init
    raise AssertionError("Torch not compiled with CUDA enabled")
AssertionError: Torch not compiled with CUDA enabled"""
    assert searcher.search(paste).results[0].slug == "cuda-hardcoded-on-macos"
    on_linux = searcher.search(paste.replace("/Users/ana", "/home/ana"))
    assert on_linux.results[0].slug != "cuda-hardcoded-on-macos"


def test_a_short_signature_with_its_names_said_whole_is_found_among_many_alike(searcher):
    # a hundred signatures say "No module named '...'"; a paste whose other lines hold rare words
    # must still gather the one quoting the module it lacks, but not one whose name is in another role
    paste = """ModuleNotFoundError: No module named 'torch'

hello, I just start the launcher and it's said
Starting Voice-Changer with Conda for AMD support...
Traceback (most recent call last):
  File "C:\\Users\\me\\Desktop\\voice-changer\\server.py", line 13, in <module>
    from assets.configs.config import Config
  File "C:\\Users\\me\\Desktop\\voice-changer\\assets\\configs\\config.py", line 10, in <module>
    import torch
ModuleNotFoundError: No module named 'torch'
Press any key to continue . . .
i try many times and try reinstall the launcher"""
    result = searcher.search(paste)
    assert "torch" in result.results[0].matched.split("'"), [
        (h.slug, h.score, h.matched) for h in result.results[:3]
    ]
    other = searcher.search("AttributeError: 'module' object has no attribute 'float32'")
    assert other.results[0].slug != "model-module-on-unwrapped-model", [
        (h.slug, h.score) for h in other.results[:3]
    ]
