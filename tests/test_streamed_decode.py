"""The row-streamed tiled decode (`tileblend.streamed`) against the installed diffusers' own tiled decode, bit for bit.

Every covered class of `tileblend.tiny_models` is decoded once as diffusers does and once streamed, in float32 and
bfloat16; the blend calls are recorded (more than zero, and the same calls in the same order), and again with edge
tiles of another size, in a batch of two, sliced and not. AutoencoderKL and Wan also run clipped edge tiles down to
one latent row, a batch of two with and without slicing, `return_dict=False` and a generator. A class whose
`tiled_decode` is edited is refused by name and decodes as written. `enable(streamed_decode=True)`, `disable()`, the
`streamed_decode(vae)` block and `tileblend run --streamed-decode` are checked for what they install and restore.
"""

import functools
import inspect
import textwrap
import warnings

import pytest
import torch

import tileblend
from tileblend import cli
from tileblend.calls import record_blends
from tileblend.streamed import families, install, source
from tileblend.tiny_models import MODELS, build_model, make_input, missing_class, run_path


COVERED_ENTRIES = [name for name, entry in MODELS.items() if entry.class_name in source.COVERED]
PRECISIONS = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def covered_model(name: str, precision: torch.dtype = torch.float32):
    """The tiny model of registry entry `name`, one per entry and dtype for the module (tests put back any setting they
    change); skipped where the installed diffusers lacks the class or has another tiled decode than the one the
    streamed version was written for."""
    entry = MODELS[name]
    if missing_class(entry):
        pytest.skip(missing_class(entry))
    model = _build_once(name, precision)
    if source.streamed_version(inspect.getattr_static(type(model), "tiled_decode")) is None:
        pytest.skip(f"this diffusers' {entry.class_name}.tiled_decode is not the one tileblend streams")
    return model


@functools.cache
def _build_once(name: str, precision: torch.dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_model(MODELS[name], precision)


def stock_and_streamed(model, decode):
    """`decode(model)` as diffusers runs it and inside `streamed_decode(model)`, with the blend calls of each."""
    with record_blends(type(model)) as stock_calls:
        stock = decode(model)
    with tileblend.streamed_decode(model), record_blends(type(model)) as streamed_calls:
        assert "tiled_decode" in vars(model)
        streamed = decode(model)
    assert "tiled_decode" not in vars(model)
    return stock, streamed, stock_calls, streamed_calls


def assert_same(stock, streamed, stock_calls, streamed_calls):
    assert stock.shape == streamed.shape and stock.dtype == streamed.dtype
    assert torch.equal(stock, streamed)
    assert len(stock_calls) > 0
    assert streamed_calls == stock_calls


@pytest.mark.parametrize("precision", list(PRECISIONS))
@pytest.mark.parametrize("name", COVERED_ENTRIES)
def test_streamed_equals_stock(name, precision):
    entry = MODELS[name]
    model = covered_model(name, PRECISIONS[precision])
    latent = make_input(entry, "decode", PRECISIONS[precision])
    assert_same(*stock_and_streamed(model, lambda m: run_path(m, entry, "decode", latent)))


@pytest.mark.parametrize("precision", list(PRECISIONS))
@pytest.mark.parametrize("shape", [(2, 4, 25, 13), (1, 4, 13, 40)])
def test_kl_clipped_edges_batches_and_slicing(shape, precision):
    """Edge tiles of 1 latent row or column (tiles of 16 every 12), non-square, batch 2 with and without slicing,
    `return_dict=False` and a generator."""
    model = covered_model("kl", PRECISIONS[precision])
    latent = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(PRECISIONS[precision])
    try:
        for slicing in (False, True):
            model.use_slicing = slicing

            def decode(m):
                with torch.no_grad():
                    return m.decode(latent, return_dict=False, generator=torch.Generator().manual_seed(0))[0]

            stock, streamed, stock_calls, streamed_calls = stock_and_streamed(model, decode)
            assert_same(stock, streamed, stock_calls, streamed_calls)
            assert stock_calls.clipped
    finally:
        model.use_slicing = False


def test_wan_edges_batch_and_slicing():
    """Tiles of 4 latent rows every 3 over 7 x 8 latents: edge tiles of 1 and 2 latent rows, the output cut, the
    clamp; batch 2, sliced and not."""
    model = covered_model("wan")
    latent = torch.randn((2, 16, 1, 7, 8), generator=torch.Generator().manual_seed(2))
    try:
        for slicing in (False, True):
            model.use_slicing = slicing
            with torch.no_grad():
                results = stock_and_streamed(model, lambda m: m.decode(latent).sample)
            assert_same(*results)
    finally:
        model.use_slicing = False


def test_wan_with_patches():
    """A Wan-2.2-style VAE (patch_size 2, residual, 16x compression): the walk runs on patches, then unpatchifies."""
    import diffusers

    covered_model("wan")  # skips where this diffusers' Wan decode is not covered
    torch.manual_seed(0)
    model = diffusers.AutoencoderKLWan(
        base_dim=8,
        z_dim=4,
        dim_mult=[1, 1, 1, 1],
        num_res_blocks=1,
        temperal_downsample=[False, True, True],
        patch_size=2,
        in_channels=12,
        out_channels=12,
        is_residual=True,
        scale_factor_spatial=16,
    ).eval()
    model.enable_tiling(
        tile_sample_min_height=64, tile_sample_min_width=64, tile_sample_stride_height=48, tile_sample_stride_width=48
    )
    latent = torch.randn((1, 4, 2, 9, 7), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert_same(*stock_and_streamed(model, lambda m: m.decode(latent).sample))


def edited_subclass():
    """A subclass of AutoencoderKL whose `tiled_decode` is the stock one with one edit (a different overlap)."""
    import diffusers

    stock = textwrap.dedent(inspect.getsource(diffusers.AutoencoderKL.tiled_decode))
    edited = stock.replace("(1 - self.tile_overlap_factor)", "(1 - self.tile_overlap_factor / 2)")
    assert edited != stock
    namespace = dict(vars(inspect.getmodule(diffusers.AutoencoderKL)))
    exec(compile(edited, "<edited tiled_decode>", "exec"), namespace)
    return type("EditedKL", (diffusers.AutoencoderKL,), {"tiled_decode": namespace["tiled_decode"]})


def test_edited_subclass_is_refused_by_name_and_runs_stock(monkeypatch):
    entry = MODELS["kl"]
    model = build_model(MODELS["kl"])
    model.__class__ = edited_subclass()
    latent = make_input(entry, "decode")
    monkeypatch.setattr("tileblend.streamed.families.decode_rows", lambda *args: pytest.fail("the walk ran"))
    expected = run_path(model, entry, "decode", latent)
    with pytest.warns(UserWarning, match=r"no streamed tiled decode for .*EditedKL \(its tiled_decode"):
        with tileblend.streamed_decode(model):
            assert "tiled_decode" not in vars(model)
            actual = run_path(model, entry, "decode", latent)
    assert torch.equal(expected, actual)


def test_enable_refuses_an_edited_covered_class_by_name(monkeypatch):
    import diffusers

    monkeypatch.setattr(diffusers.AutoencoderKLFlux2, "tiled_decode", edited_subclass().tiled_decode)
    try:
        with pytest.warns(UserWarning, match=r"no streamed tiled decode for .*AutoencoderKLFlux2 "):
            tileblend.enable(streamed_decode=True)
        streamed = install.streamed_classes()
        assert diffusers.AutoencoderKL in streamed and diffusers.AutoencoderKLFlux2 not in streamed
    finally:
        tileblend.disable()


def test_enable_streams_every_covered_class_and_disable_restores():
    import diffusers

    originals = {name: vars(getattr(diffusers, name))["tiled_decode"] for name in source.COVERED}
    entry = MODELS["kl"]
    model = covered_model("kl")
    latent = make_input(entry, "decode")
    expected = run_path(model, entry, "decode", latent)
    try:
        tileblend.enable(streamed_decode=True)
        assert {cls.__name__ for cls in install.streamed_classes()} == set(source.COVERED)
        assert install.is_streamed(diffusers.AutoencoderKL.tiled_decode)
        assert diffusers.AutoencoderKL.tiled_decode.__qualname__ == "AutoencoderKL.tiled_decode"
        with record_blends(diffusers.AutoencoderKL) as calls:
            actual = run_path(model, entry, "decode", latent)
        assert torch.equal(expected, actual) and len(calls) > 0
        with tileblend.streamed_decode(model):  # the class streams already: the block adds nothing
            assert "tiled_decode" not in vars(model)
    finally:
        tileblend.disable()
    assert install.streamed_classes() == []
    assert all(vars(getattr(diffusers, name))["tiled_decode"] is function for name, function in originals.items())


def test_streamed_decode_block_touches_one_model_and_nests():
    entry = MODELS["kl"]
    model, other = covered_model("kl"), build_model(MODELS["kl"])
    with tileblend.streamed_decode(model) as yielded:
        assert yielded is model and "tiled_decode" not in vars(other)
        outer = model.tiled_decode
        with tileblend.streamed_decode(model):
            assert model.tiled_decode is not outer
        assert model.tiled_decode == outer
        assert not install.is_streamed(type(model).tiled_decode)
    assert "tiled_decode" not in vars(model)
    latent = make_input(entry, "decode")
    assert torch.equal(run_path(model, entry, "decode", latent), run_path(other, entry, "decode", latent))


def test_run_flag_streams_the_scripts_decodes(tmp_path, capsys):
    script = tmp_path / "script.py"
    script.write_text(
        "import diffusers\nfrom tileblend.streamed.install import is_streamed\n"
        "assert is_streamed(diffusers.AutoencoderKLWan.tiled_decode)\n",
        encoding="utf-8",
    )
    try:
        assert cli.main(["run", "--streamed-decode", str(script)]) == 0
    finally:
        tileblend.disable()
    assert f"tiled decode streamed for {len(source.COVERED)} classes" in capsys.readouterr().err


def test_verify_checks_the_streamed_decode(monkeypatch):
    from tileblend.verify import streamed_checks

    result = streamed_checks.verify_streamed(MODELS["kl"], torch.float32, "cpu")
    assert result.exact and result.same_calls and result.blend_calls and result.ok
    walk = families.decode_rows

    def off_by_one_ulp(model, grid, decode_tile):
        output = walk(model, grid, decode_tile)
        output[..., -1, -1] = torch.nextafter(output[..., -1, -1], torch.tensor(float("inf")))
        return output

    monkeypatch.setattr("tileblend.streamed.families.decode_rows", off_by_one_ulp)
    result = streamed_checks.verify_streamed(MODELS["kl"], torch.float32, "cpu")
    assert result.exact is False and not result.ok


def test_autograd_decodes_run_stock(monkeypatch):
    """With grad on and parameters requiring grad, the stock decode runs (the walk reuses buffers backward needs)."""
    entry = MODELS["kl"]
    model = build_model(entry)
    latent = make_input(entry, "decode")
    expected = model.decode(latent).sample
    monkeypatch.setattr("tileblend.streamed.families.decode_rows", lambda *args: pytest.fail("the walk ran"))
    with tileblend.streamed_decode(model):
        actual = model.decode(latent).sample
    assert torch.equal(expected, actual)
    actual.sum().backward()
    assert model.decoder.conv_out.weight.grad is not None


@pytest.mark.parametrize("name", COVERED_ENTRIES)
def test_every_covered_class_with_a_clipped_edge_batch_2_and_slicing(name):
    """The registry latent two latent rows and columns larger (a last tile of two rows or columns where the stride
    divides it, of another size elsewhere), in a batch of two, sliced and not (HunyuanVideo15: a batch of one, its
    stock decoder's attention raises on two)."""
    entry = MODELS[name]
    model = covered_model(name)
    batch = 1 if name == "hunyuanvideo15" else 2
    shape = (batch, *entry.latent_shape[1:-2], entry.latent_shape[-2] + 2, entry.latent_shape[-1] + 2)
    latent = torch.randn(shape, generator=torch.Generator().manual_seed(4))
    try:
        for slicing in (False, True):
            model.use_slicing = slicing
            assert_same(*stock_and_streamed(model, lambda m: run_path(m, entry, "decode", latent)))
    finally:
        model.use_slicing = False
