"""The registry of tiny models (`tileblend.models`) covers exactly the installed diffusers' classes with loop blends,
and the blend-call recorder (`tileblend.calls`) records what it claims to."""

import pytest
import torch

from tileblend import models, reference
from tileblend.blend import BLEND_AXES
from tileblend.calls import BlendCall, record_blends
from tileblend.models import (
    MODELS,
    REGISTRY,
    ModelEntry,
    TiledPath,
    build_model,
    make_input,
    missing_class,
    run_path,
)
from tileblend.patch import autoencoder_classes, find_loop_blends


@pytest.fixture(scope="module")
def loop_blends() -> dict[str, set[str]]:
    """Class name -> names of its loop blend methods, in the installed diffusers."""
    found, _ = find_loop_blends(autoencoder_classes())
    blends = {}
    for patched in found:
        blends.setdefault(patched.cls.__name__, set()).add(patched.method)
    return blends


AVAILABLE = [entry for entry in REGISTRY if not missing_class(entry)]
"""The entries whose class the installed diffusers has (all of them from the pinned release on)."""


def test_registry_covers_every_class_with_loop_blends(loop_blends):
    registered = {entry.class_name for entry in AVAILABLE}
    missing = sorted(set(loop_blends) - registered)
    stale = sorted(registered - set(loop_blends))
    assert not missing, f"diffusers classes with loop blends but no registry entry: {missing}"
    assert not stale, f"registry entries naming classes without loop blends: {stale}"


BROKEN_PATHS = [
    pytest.param(entry, path, id=f"{entry.name}-{path}")
    for entry in AVAILABLE
    for path, spec in entry.paths().items()
    if not spec.runs
]


@pytest.mark.parametrize("entry, path", BROKEN_PATHS)
def test_upstream_bug_still_raises(entry, path):
    """A path skipped for an upstream bug still fails; when upstream fixes it, this fails and the entry is updated."""
    model = build_model(entry)
    with pytest.raises(Exception):
        run_path(model, entry, path, make_input(entry, path))


def test_one_entry_per_class_and_unique_names():
    assert len({entry.class_name for entry in REGISTRY}) == len(REGISTRY)
    assert len(MODELS) == len(REGISTRY)


def test_declared_blends_are_loop_blends_of_the_class(loop_blends):
    for entry in AVAILABLE:
        assert entry.paths(), f"{entry.name} declares no tiled path"
        for path, spec in entry.paths().items():
            assert spec.blends, f"{entry.name} {path} declares no blend"
            assert set(spec.blends) <= loop_blends[entry.class_name], f"{entry.name} {path}: {spec.blends}"
            assert spec.runs or spec.upstream_bug, f"{entry.name} {path} is skipped without an upstream bug"


def test_every_declared_loop_blend_is_reached_by_some_path(loop_blends):
    """blend_t of the Hunyuan refiner and HunyuanVideo 1.5 is never called by diffusers; every other one must be."""
    never_called = {"AutoencoderKLHunyuanImageRefiner": {"blend_t"}, "AutoencoderKLHunyuanVideo15": {"blend_t"}}
    for entry in AVAILABLE:
        reached = {method for spec in entry.paths().values() if spec.runs for method in spec.blends}
        unreached = loop_blends[entry.class_name] - reached
        assert unreached == never_called.get(entry.class_name, set()), f"{entry.name}: {unreached} not reached"


def test_registry_declares_clipped_and_zero_extent_cases():
    specs = [spec for entry in REGISTRY for spec in entry.paths().values() if spec.runs]
    assert any(spec.clipped for spec in specs)
    assert any(spec.zero for spec in specs)


def test_entries_copy_the_dicts_they_are_given():
    """An entry keeps a deep copy of its dicts: changing the dict it was built from (nested lists included) or another
    entry built from the same dict changes nothing, and the entry's own mappings are read-only."""
    shared = {"dim_mult": [1, 1], "z_dim": 4}
    tiles = {"tile_sample_min_height": 32}
    first, second = (
        ModelEntry(
            name,
            "AutoencoderKLWan",
            shared,
            sample_shape=(1, 3, 1, 48, 48),
            latent_shape=(1, 4, 1, 6, 6),
            encode=None,
            decode=TiledPath(("blend_v",)),
            tiling=tiles,
        )
        for name in ("first", "second")
    )
    shared["dim_mult"].append(2)
    shared["z_dim"] = 8
    tiles["tile_sample_min_height"] = 64
    first.init_kwargs["dim_mult"].append(3)

    assert first.init_kwargs == {"dim_mult": [1, 1, 3], "z_dim": 4}
    assert second.init_kwargs == {"dim_mult": [1, 1], "z_dim": 4}
    assert first.tiling == second.tiling == {"tile_sample_min_height": 32}
    assert first.attributes == second.attributes == {}
    with pytest.raises(TypeError):
        second.init_kwargs["z_dim"] = 8
    with pytest.raises(TypeError):
        second.tiling["tile_sample_min_height"] = 8


def test_registry_entries_share_no_mutable_state(monkeypatch):
    """The module-level dicts the entries are written from (`WAN_TINY`, `KL_2D_TINY`, `SMALL_TILES`, ...) can change
    without changing an entry, and no two entries hold the same list."""
    module_dicts = [value for name, value in vars(models).items() if name.isupper() and isinstance(value, dict)]
    changed = object()
    for module_dict in module_dicts:
        if module_dict is not MODELS:
            for key in module_dict:
                monkeypatch.setitem(module_dict, key, changed)
    mappings = [mapping for entry in REGISTRY for mapping in (entry.init_kwargs, entry.tiling, entry.attributes)]
    assert not any(value is changed for mapping in mappings for value in mapping.values())
    lists = [value for mapping in mappings for value in mapping.values() if isinstance(value, list)]
    assert len(lists) > 2 and len({id(value) for value in lists}) == len(lists)


def test_built_model_config_shares_no_list_with_the_registry():
    """diffusers keeps the lists it is given in the model's config: `build_model` passes copies."""
    entry = MODELS["wan"]
    model = build_model(entry)
    model.config["dim_mult"].append(9)
    assert entry.init_kwargs["dim_mult"] == [1, 1, 1, 1]
    for key, value in entry.init_kwargs.items():
        if isinstance(value, list):
            assert model.config[key] is not value, key


class Blender:
    """A stand-in for an autoencoder class: blend methods that call the reference loops."""

    def blend_v(self, a, b, blend_extent):
        return reference.blend_v(a, b, blend_extent)

    def blend_h(self, a, b, blend_extent):
        return reference.blend_h(a, b, blend_extent)


def test_record_blends_records_effective_extents_and_restores():
    installed = dict(vars(Blender))
    a, b, c = torch.randn(1, 1, 8, 8), torch.randn(1, 1, 3, 8), torch.randn(1, 1, 8, 8)
    with record_blends(Blender) as calls:
        out = Blender().blend_v(a, b, 5)
        Blender().blend_h(a, c, 0)
        Blender().blend_h(a, c, 4)
    assert out is b
    assert calls == [
        BlendCall("blend_v", extent=5, effective=3),
        BlendCall("blend_h", extent=0, effective=0),
        BlendCall("blend_h", extent=4, effective=4),
    ]
    assert calls.counts() == {"blend_v": 1, "blend_h": 2}
    assert calls.clipped and calls.zero
    assert all(vars(Blender)[name] is installed[name] for name in ("blend_v", "blend_h"))
    assert set(BLEND_AXES) >= calls.methods()


def test_record_blends_result_is_the_installed_methods():
    a, b = torch.randn(1, 1, 6, 6), torch.randn(1, 1, 6, 6)
    expected = reference.blend_v(a, b.clone(), 4)
    with record_blends(Blender):
        actual = Blender().blend_v(a, b, 4)
    assert torch.equal(expected, actual)
