"""Tiled encode and decode of every tiny model of `tileblend.tiny_models`, with tileblend, against diffusers' loops.

`TestTiledParity` is parametrized over `REGISTRY` (each test id ends with the entry name: `-k wan`), so a new registry
entry is tested without a new file. Each case runs the entry's tiled encode or decode for real (the blend calls are
counted, so a case that never blends fails):

- loop vs vectorized, bitwise, in float32, bfloat16 and float16 on the CPU, with the declared blends, clipped and zero
  extents seen;
- toggling tiling and slicing gives the same outputs, bit for bit, with tileblend enabled as without it, and leaves
  diffusers' own blend methods in place when tileblend is only imported;
- CUDA graph capture and replay of tiled encode and decode equal eager execution (skipped without CUDA).
"""

import functools
import inspect

import pytest
import torch

import tileblend
from tileblend.blend import DTYPES
from tileblend.calls import record_blends
from tileblend.compare import bitwise_equal
from tileblend.cuda_graph import capture, replays_equal_eager
from tileblend.tiny_models import MODELS, REGISTRY, ModelEntry, build_model, make_input, missing_class, run_path


MODEL_DTYPES = ("float32", "bfloat16", "float16")
PATHS = ("encode", "decode")


def cached_model(entry: ModelEntry, dtype: torch.dtype, device: str = "cpu"):
    """One model per entry, dtype and device for the whole session: tests must leave its settings as they found them."""
    return _build_once(entry.name, dtype, device)


@functools.cache
def _build_once(name: str, dtype: torch.dtype, device: str):
    return build_model(MODELS[name], dtype, device)


def run_or_skip_dtype(function, dtype):
    """Call `function()`; skip the test when the device has no kernel for `dtype` (float16 convolutions on old CPUs)."""
    try:
        return function()
    except (RuntimeError, NotImplementedError) as error:
        if "not implemented for" in str(error) and dtype != torch.float32:
            pytest.skip(f"no {dtype} kernel on this device: {error}")
        raise


def runnable_path(entry: ModelEntry, path: str):
    """The entry's `TiledPath` for `path`, or skip: the installed diffusers has no such class (an older release) or
    the class no such tiled path, or an upstream bug breaks it."""
    if missing_class(entry):
        pytest.skip(missing_class(entry))
    spec = entry.paths().get(path)
    if spec is None:
        pytest.skip(f"{entry.class_name} has no tiled {path}")
    if not spec.runs:
        pytest.skip(f"upstream bug in {entry.class_name} tiled {path}: {spec.upstream_bug}")
    return spec


def assert_blends_seen(calls, spec, context: str):
    assert len(calls) > 0, f"{context}: no blend method was called, the tiled path never blended"
    assert calls.methods() == set(spec.blends), f"{context}: blends called {calls.counts()}, declared {spec.blends}"
    assert calls.clipped == spec.clipped, f"{context}: clipped extent seen={calls.clipped}, declared={spec.clipped}"
    assert calls.zero == spec.zero, f"{context}: zero extent seen={calls.zero}, declared={spec.zero}"


def same_outcome(expected, actual) -> bool:
    """Bitwise-equal tensors, or the same error message."""
    if isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor):
        return bitwise_equal(expected, actual)
    return expected == actual


@pytest.mark.parametrize("entry", REGISTRY, ids=[entry.name for entry in REGISTRY])
class TestTiledParity:
    """Every test runs once per registry entry; the models are built once per entry, dtype and device."""

    @pytest.mark.parametrize("dtype_name", MODEL_DTYPES)
    @pytest.mark.parametrize("path", PATHS)
    def test_tiled_vectorized_equals_loop(self, entry, path, dtype_name):
        spec = runnable_path(entry, path)
        dtype = DTYPES[dtype_name]
        model = run_or_skip_dtype(lambda: cached_model(entry, dtype), dtype)
        cls = type(model)
        x = make_input(entry, path, dtype)

        assert not tileblend.is_enabled()
        with record_blends(cls) as loop_calls:
            expected = run_or_skip_dtype(lambda: run_path(model, entry, path, x), dtype)
        with tileblend.enabled():
            for method in spec.blends:
                assert vars(cls)[method] is not tileblend.patch.original_method(cls, method), f"{method} not patched"
            with record_blends(cls) as vectorized_calls:
                actual = run_path(model, entry, path, x)

        assert_blends_seen(loop_calls, spec, f"{entry.name} {path} {dtype_name}")
        assert vectorized_calls == loop_calls, "the vectorized run made different blend calls"
        assert bitwise_equal(expected, actual), f"{entry.class_name} tiled {path} in {dtype_name} differs"

    def test_toggling_tiling_and_slicing_unchanged(self, entry):
        path = "decode" if entry.decode is not None and entry.decode.runs else "encode"
        spec = runnable_path(entry, path)
        cls = type(cached_model(entry, torch.float32))

        # Importing tileblend leaves diffusers' own methods in place.
        for method in spec.blends:
            function = vars(cls)[method]
            assert inspect.getsourcefile(function) == inspect.getsourcefile(cls), f"{method} replaced on import"

        def toggle_sequence():
            """Outputs (or errors) of a batch of two inputs: plain, tiled, tiled and sliced, plain again."""
            model = build_model(entry)
            model.disable_tiling()
            batch = 2 if hasattr(model, "enable_slicing") else 1
            x = torch.cat([make_input(entry, path, seed=seed) for seed in range(batch)])
            results = []
            with record_blends(cls) as calls:
                for enable_tiling, enable_slicing in ((False, False), (True, False), (True, True), (False, False)):
                    model.enable_tiling(**entry.tiling) if enable_tiling else model.disable_tiling()
                    if hasattr(model, "enable_slicing"):  # the LTX-2 diffusion decoder has no slicing
                        model.enable_slicing() if enable_slicing else model.disable_slicing()
                    try:
                        results.append(run_path(model, entry, path, x))
                    except Exception as error:  # compared, not hidden: both runs must fail the same way
                        results.append(f"{type(error).__name__}: {error}")
            return results, calls

        without, calls_without = toggle_sequence()
        with tileblend.enabled():
            with_tileblend, calls_with = toggle_sequence()

        assert len(calls_without) > 0, "tiling never reached a blend"
        assert calls_with == calls_without
        assert same_outcome(without[0], without[-1]), "disabling tiling and slicing did not restore the output"
        for step, (expected, actual) in enumerate(zip(without, with_tileblend)):
            assert same_outcome(expected, actual), f"step {step}: outcome differs with tileblend enabled"

    @pytest.mark.cuda
    @pytest.mark.parametrize("dtype_name", MODEL_DTYPES)
    @pytest.mark.parametrize("path", PATHS)
    def test_cuda_graph_replay(self, entry, path, dtype_name):
        spec = runnable_path(entry, path)
        if path == "decode" and entry.decode_uses_generator:
            pytest.skip("decode draws its noise from a host generator: a replay cannot reproduce eager noise")
        dtype = DTYPES[dtype_name]
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        model = cached_model(entry, dtype, "cuda")
        cls = type(model)
        static_input = make_input(entry, path, dtype, "cuda")

        with tileblend.enabled():
            with record_blends(cls) as calls:
                graph, static_output = capture(lambda x: run_path(model, entry, path, x), static_input)
            assert_blends_seen(calls, spec, f"{entry.name} {path} {dtype_name} capture")
            new_inputs = [make_input(entry, path, dtype, "cuda", seed=seed) for seed in (1, 2, 3)]
            replays = replays_equal_eager(
                graph, lambda x: run_path(model, entry, path, x), static_input, static_output, new_inputs
            )
        assert all(replays), f"replays equal to eager: {replays}"
