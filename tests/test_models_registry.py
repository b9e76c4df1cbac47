"""The registry of tiny models (`tileblend.tiny_models`) covers exactly the installed diffusers' classes with loop blends,
and the blend-call recorder (`tileblend.calls`) records what it claims to."""

import pytest
import torch

from tileblend import reference
from tileblend.blend import BLEND_AXES
from tileblend.calls import BlendCall, record_blends
from tileblend.patch import autoencoder_classes, find_loop_blends
from tileblend.tiny_models import (
    MODELS,
    REGISTRY,
    build_model,
    make_input,
    missing_class,
    run_path,
)


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
    """A path skipped for an upstream bug still raises its error; when upstream fixes it, this fails and the entry is
    updated."""
    model = build_model(entry)
    with pytest.raises(Exception) as raised:
        run_path(model, entry, path, make_input(entry, path))
    assert f"{raised.type.__name__}: {raised.value}".startswith(entry.paths()[path].raises)


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


def test_record_blends_calls_the_installed_method_and_returns_its_result():
    class Marker:
        def blend_v(self, a, b, blend_extent):
            b.fill_(blend_extent)
            return "what the installed method returned"

    b = torch.zeros(1, 1, 6, 6)
    with record_blends(Marker) as calls:
        assert Marker().blend_v(torch.ones(1, 1, 6, 6), b, 4) == "what the installed method returned"
    assert torch.equal(b, torch.full_like(b, 4)) and calls.counts() == {"blend_v": 1}
