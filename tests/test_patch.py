"""`tileblend.enable()` swaps exactly diffusers' loop blends for the vectorized ones, and `disable()` swaps them back."""

import collections
import functools
import inspect
import threading
import warnings

import diffusers
import pytest
import torch
from diffusers import AutoencoderKL

import tileblend
from tileblend import patch
from tileblend.calls import record_blends
from tileblend.compare import bitwise_equal
from tileblend.tiny_models import MODELS, build_model, make_input, run_path


@pytest.fixture(autouse=True)
def restore_diffusers():
    """Every test starts and ends with stock diffusers."""
    tileblend.disable()
    yield
    tileblend.disable()


class LoopVAE:
    """A loop blend outside diffusers: recognised."""

    def blend_v(self, a, b, blend_extent):
        blend_extent = min(a.shape[2], b.shape[2], blend_extent)
        for y in range(blend_extent):
            b[:, :, y, :] = a[:, :, -blend_extent + y, :] * (1 - y / blend_extent) + b[:, :, y, :] * (y / blend_extent)
        return b


class LookalikeVAE:
    """Named like blends, but not the loop: left alone and reported."""

    def blend_v(self, a, b, blend_extent):
        return b

    def blend_h(self, a, b, blend_extent):
        blend_extent = min(a.shape[3], b.shape[3], blend_extent)
        for x in range(blend_extent):
            b[:, :, :, x] = a[:, :, :, -blend_extent + x] * (x / blend_extent) + b[:, :, :, x] * (1 - x / blend_extent)
        return b


def blend_functions():
    """The current blend functions of every autoencoder class, by (class, name)."""
    return {
        (cls, name): vars(cls)[name]
        for cls in patch.autoencoder_classes()
        for name in ("blend_v", "blend_h", "blend_t")
        if name in vars(cls)
    }


@pytest.mark.skipif(diffusers.__version__ != "0.42.1", reason="the counts are those of diffusers 0.42.1")
def test_enable_patches_the_44_loops_of_diffusers_0_42_1():
    patched = tileblend.enable()
    assert len(patched) == 44
    assert len({p.cls for p in patched}) == 19
    assert collections.Counter(p.method for p in patched) == {"blend_v": 19, "blend_h": 19, "blend_t": 6}
    assert {(p.method, p.axis) for p in patched} == {("blend_v", -2), ("blend_h", -1), ("blend_t", -3)}
    assert all(p.cls.__module__.startswith("diffusers.models.autoencoders.") for p in patched)


def test_enable_replaces_every_loop_and_disable_restores_the_same_objects():
    originals = blend_functions()
    patched = tileblend.enable()
    assert patched and tileblend.is_enabled()
    current = blend_functions()
    for p in patched:
        assert current[(p.cls, p.method)] is not originals[(p.cls, p.method)]
        assert patch.original_method(p.cls, p.method) is originals[(p.cls, p.method)]
    untouched = set(originals) - {(p.cls, p.method) for p in patched}
    assert all(current[key] is originals[key] for key in untouched)

    tileblend.disable()
    assert not tileblend.is_enabled()
    assert all(function is originals[key] for key, function in blend_functions().items())


def test_enable_and_disable_are_idempotent():
    originals = blend_functions()
    first = tileblend.enable()
    functions = blend_functions()
    assert tileblend.enable() == first
    assert blend_functions() == functions  # not wrapped twice
    tileblend.disable()
    tileblend.disable()
    assert blend_functions() == originals


def test_enabled_scopes_and_nests():
    originals = blend_functions()
    with tileblend.enabled() as patched:
        assert len(patched) > 0 and tileblend.is_enabled()
        functions = blend_functions()
        with tileblend.enabled():
            assert blend_functions() == functions
        assert tileblend.is_enabled() and blend_functions() == functions
    assert not tileblend.is_enabled()
    assert blend_functions() == originals


def test_a_later_enabled_block_reads_no_source(monkeypatch):
    """Discovery reads and parses each method's source once per process (it took about 150 ms per outermost block)."""
    with tileblend.enabled() as first:
        pass

    def no_source(function):
        raise AssertionError(f"source of {function.__qualname__} read again")

    monkeypatch.setattr(patch.inspect, "getsource", no_source)
    with tileblend.enabled() as second:
        assert second == first and all(
            vars(p.cls)[p.method] is not patch.original_method(p.cls, p.method) for p in second
        )


def test_enabled_keeps_an_earlier_enable():
    tileblend.enable()
    functions = blend_functions()
    with tileblend.enabled():
        pass
    assert tileblend.is_enabled() and blend_functions() == functions


def test_enabled_restores_on_error():
    originals = blend_functions()
    with pytest.raises(RuntimeError), tileblend.enabled():
        raise RuntimeError
    assert not tileblend.is_enabled() and blend_functions() == originals


def test_lookalikes_are_reported_and_left_alone(monkeypatch):
    found, skipped = patch.find_loop_blends([LoopVAE, LookalikeVAE])
    assert [(p.cls, p.method, p.axis, p.rank) for p in found] == [(LoopVAE, "blend_v", -2, 4)]
    assert skipped == [f"{__name__}.LookalikeVAE.blend_v", f"{__name__}.LookalikeVAE.blend_h"]

    lookalike_functions = dict(vars(LookalikeVAE))
    monkeypatch.setattr(patch, "autoencoder_classes", lambda: [LoopVAE, LookalikeVAE])
    with pytest.warns(UserWarning, match="LookalikeVAE.blend_v, .*LookalikeVAE.blend_h"):
        tileblend.enable()
    assert vars(LookalikeVAE) == lookalike_functions
    assert vars(LoopVAE)["blend_v"] is not patch.original_method(LoopVAE, "blend_v")


def test_a_wrapper_of_the_loop_is_left_alone_and_named(monkeypatch):
    """A library wrapped the loop with `functools.wraps` (a clamp) before `enable()`: `inspect.getsource` shows the loop
    through `__wrapped__`, but the method is the wrapper, so it stays, named in the warning, and still runs."""
    loop = vars(AutoencoderKL)["blend_v"]

    @functools.wraps(loop)
    def clamped(self, a, b, blend_extent):
        return loop(self, a, b, blend_extent).clamp_(max=0.5)

    monkeypatch.setattr(AutoencoderKL, "blend_v", clamped)
    with pytest.warns(UserWarning, match=r"left these methods alone .*autoencoder_kl\.AutoencoderKL\.blend_v"):
        patched = tileblend.enable()
    assert (AutoencoderKL, "blend_v") not in {(p.cls, p.method) for p in patched}
    assert (AutoencoderKL, "blend_h") in {(p.cls, p.method) for p in patched}
    assert vars(AutoencoderKL)["blend_v"] is clamped
    a, b = torch.ones(1, 1, 4, 4), torch.ones(1, 1, 4, 4)
    assert AutoencoderKL.blend_v(None, a, b, 4).max() == 0.5  # the wrapper ran


def recording_wrap(seen: list):
    """A `wrap` for `patch.wrapped_methods` that appends each (cls, name, function) it gets to `seen`."""

    def wrap(cls, name, function):
        seen.append((cls, name, function))
        return lambda self, a, b, blend_extent: "wrapped"

    return wrap


def test_wrapped_methods_wraps_what_is_installed_and_restores_it_on_error():
    loop = vars(LoopVAE)["blend_v"]
    seen = []
    wrap = recording_wrap(seen)
    with pytest.raises(RuntimeError), patch.wrapped_methods([(LoopVAE, "blend_v")], wrap):
        assert seen == [(LoopVAE, "blend_v", loop)]
        assert LoopVAE().blend_v(None, None, 0) == "wrapped"
        raise RuntimeError
    assert vars(LoopVAE)["blend_v"] is loop


def test_wrapped_methods_wraps_an_inherited_method_and_leaves_no_attribute_on_the_subclass():
    """A subclass that inherits the method gets the wrapper of the base's function; on exit (also on an error) it has
    no attribute of its own again and the base is untouched; a method someone installs meanwhile stays."""

    class Subclass(LoopVAE):
        pass

    loop = vars(LoopVAE)["blend_v"]
    seen = []
    wrap = recording_wrap(seen)
    with pytest.raises(RuntimeError), patch.wrapped_methods([(Subclass, "blend_v")], wrap):
        assert seen == [(Subclass, "blend_v", loop)]
        assert Subclass().blend_v(None, None, 0) == "wrapped" and vars(LoopVAE)["blend_v"] is loop
        raise RuntimeError
    assert "blend_v" not in vars(Subclass) and vars(LoopVAE)["blend_v"] is loop
    assert Subclass.blend_v is loop

    def users(self, a, b, blend_extent):
        return "theirs"

    with patch.wrapped_methods([(Subclass, "blend_v")], wrap):
        Subclass.blend_v = users
    assert vars(Subclass)["blend_v"] is users and vars(LoopVAE)["blend_v"] is loop


def test_stock_diffusers_enables_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tileblend.enable()


def test_patched_method_falls_back_to_the_loop_for_other_ranks():
    """AutoencoderKL's loop indexes 4D tensors; given 5D ones it blends axis 2, and so must the patched method."""
    tileblend.enable()
    loop = patch.original_method(AutoencoderKL, "blend_v")
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, 1, 3, 8, 6, 5, generator=generator)
    expected = loop(None, a, b.clone(), 4)
    result = AutoencoderKL.blend_v(None, a, b, 4)
    assert result is b
    assert bitwise_equal(expected, b)
    assert not bitwise_equal(tileblend.blend_v(a, b.clone(), 4), expected)  # the vectorized one blends axis -2

    a4, b4 = a[:, 0], b[:, 0].clone()
    assert bitwise_equal(loop(None, a4, b4.clone(), 3), AutoencoderKL.blend_v(None, a4, b4, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_autoencoder_kl_tiled_encode_and_decode_are_unchanged(dtype):
    """The registry's tiny AutoencoderKL reaches both blends; enabled output equals stock output bit for bit."""
    entry = MODELS["kl"]
    vae = build_model(entry, dtype)
    image, latents = make_input(entry, "encode", dtype, seed=1), make_input(entry, "decode", dtype, seed=2)

    def run():
        with record_blends(AutoencoderKL) as calls:
            outputs = run_path(vae, entry, "encode", image), run_path(vae, entry, "decode", latents)
        assert calls.counts().get("blend_v", 0) > 0 and calls.counts().get("blend_h", 0) > 0, calls.counts()
        return outputs

    stock = run()
    with tileblend.enabled():
        assert AutoencoderKL.blend_v is not patch.original_method(AutoencoderKL, "blend_v")
        vectorized = run()
    for expected, actual in zip(stock, vectorized):
        assert bitwise_equal(expected, actual)


def test_enabled_blocks_overlapping_across_threads_restore_exactly():
    """Thread A enters, thread B enters, A leaves: B still runs patched; when B leaves, stock diffusers is back."""
    originals = blend_functions()
    step = threading.Barrier(2)
    seen = {}

    def first():
        with tileblend.enabled():
            step.wait()  # 1: A inside
            step.wait()  # 2: A leaves
        step.wait()  # 3: A is out

    def second():
        step.wait()  # 1
        with tileblend.enabled():
            step.wait()  # 2
            step.wait()  # 3
            seen["enabled"] = tileblend.is_enabled()
            seen["patched"] = AutoencoderKL.blend_v is not patch.original_method(AutoencoderKL, "blend_v")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert seen == {"enabled": True, "patched": True}
    assert not tileblend.is_enabled()
    assert blend_functions() == originals


def test_concurrent_enables_patch_once():
    originals = blend_functions()
    start = threading.Barrier(4)
    results = []

    def enter():
        start.wait()
        with tileblend.enabled() as patched:
            results.append(len(patched))
            start.wait()  # everyone inside at once

    threads = [threading.Thread(target=enter) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(results) == 4 and len(set(results)) == 1
    assert len(patch._originals) == 0 and not tileblend.is_enabled()
    assert blend_functions() == originals


def test_patched_method_pickles_by_reference_while_enabled():
    """pickle finds a function by module and qualified name: the patched method keeps the original's, so it pickles
    (to whatever `AutoencoderKL.blend_v` is when loaded)."""
    import pickle

    with tileblend.enabled():
        assert pickle.loads(pickle.dumps(AutoencoderKL.blend_v)) is AutoencoderKL.blend_v


def test_disable_keeps_a_method_the_user_installed_after_enable():
    def users_blend(self, a, b, blend_extent):
        return b

    original, loop_h = vars(AutoencoderKL)["blend_v"], vars(AutoencoderKL)["blend_h"]
    tileblend.enable()
    try:
        AutoencoderKL.blend_v = users_blend
    finally:
        tileblend.disable()
    try:
        assert vars(AutoencoderKL)["blend_v"] is users_blend
        assert vars(AutoencoderKL)["blend_h"] is loop_h and not tileblend.is_enabled()  # the others are put back
    finally:
        AutoencoderKL.blend_v = original


def test_patched_method_shows_its_own_source_and_module():
    with tileblend.enabled():
        method = AutoencoderKL.blend_v
        assert method.__module__ == "diffusers.models.autoencoders.autoencoder_kl"  # as the original's, for pickle
        assert not hasattr(method, "__wrapped__")
        assert "for y in range" not in inspect.getsource(method)
        assert "blend(a, b, blend_extent)" in inspect.getsource(method)
        assert method.__qualname__ == "AutoencoderKL.blend_v"
    assert AutoencoderKL.blend_v.__module__ == "diffusers.models.autoencoders.autoencoder_kl"
    assert "for y in range" in inspect.getsource(AutoencoderKL.blend_v)
