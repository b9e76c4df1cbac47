"""The tests `tileblend rewrite` adds to a diffusers checkout with upstream's tester-mixin layout.

Upstream tests each autoencoder with pytest classes composing a `<Model>TesterConfig` with tester mixins
(`tests/models/autoencoders/testing_utils.py` defines `AutoencoderTesterMixin`). In such a checkout the rewrite adds
the reference row loop `blend_row_loop` and `AutoencoderTilingBlendTesterMixin` to that `testing_utils.py` (and
`assert_tensors_close` and `require_torch_gpu` to its `from ...testing_utils import ...`) and, in the test file of every rewritten class that
has one, a `Test<Model>TilingBlend` class composing the model's config with the mixin (and the mixin to the file's
`from .testing_utils import ...`). Existing classes and methods are not touched; a second run refreshes the added text
and changes nothing else. `CASES` holds, per class, the tile settings that reach its blends with upstream's own tiny
config, as measured on upstream main.
"""

import ast
from pathlib import Path

from .rewrite_plan import parse_source
from .source_files import SourceFile, read_source, split_lines, with_newline
from .upstream_mixin_text import (
    MIXIN,
    MIXIN_NAME,
    REFERENCE,
    REFERENCE_NAME,
    TEST_CLASS_SUFFIX,
    TESTING_UTILS_IMPORTS,
    TilingBlendCase,
    test_class,
)


TESTS = Path("tests", "models", "autoencoders")
TESTING_UTILS = TESTS / "testing_utils.py"
LINE_LENGTH = 119

_SPATIAL_12_8 = {
    "tile_sample_min_height": 12,
    "tile_sample_min_width": 12,
    "tile_sample_stride_height": 8,
    "tile_sample_stride_width": 8,
}
_SPATIAL_32_24 = {
    "tile_sample_min_height": 32,
    "tile_sample_min_width": 32,
    "tile_sample_stride_height": 24,
    "tile_sample_stride_width": 24,
}
_SIZE_12_6 = {"tile_sample_min_size": 12, "tile_latent_min_size": 6}
_FRAMEWISE = {"use_framewise_encoding": True, "use_framewise_decoding": True}


def _sample(shape: str) -> str:
    """The body of a `get_tiling_blend_inputs()` drawing one sample of `shape` from the config's generator."""
    return (
        f'sample = randn_tensor({shape}, generator=self.generator, device=torch_device)\nreturn {{"sample": sample}}'
    )


_TOO_SMALL = "the dummy video is too small for overlapping tiles at this compression."

CASES: dict[str, TilingBlendCase] = {
    "AutoencoderDC": TilingBlendCase(
        {
            "tile_sample_min_height": 16,
            "tile_sample_min_width": 16,
            "tile_sample_stride_height": 10,
            "tile_sample_stride_width": 10,
            "tile_latent_min_height": 8,
            "tile_latent_min_width": 8,
        }
    ),
    "AutoencoderKL": TilingBlendCase(_SIZE_12_6),
    "AutoencoderKLKVAE": TilingBlendCase({"tile_sample_min_size": 16, "tile_latent_min_size": 8}),
    "ConsistencyDecoderVAE": TilingBlendCase(_SIZE_12_6),
    "AutoencoderKLHunyuanVideo": TilingBlendCase(
        _SPATIAL_12_8 | {"tile_sample_min_num_frames": 8, "tile_sample_stride_num_frames": 4}
    ),
    "AutoencoderKLLTXVideo": TilingBlendCase(
        {
            "tile_sample_min_height": 8,
            "tile_sample_min_width": 8,
            "tile_sample_stride_height": 4,
            "tile_sample_stride_width": 4,
            "tile_sample_min_num_frames": 8,
            "tile_sample_stride_num_frames": 4,
        }
        | _FRAMEWISE
    ),
    "AutoencoderKLMochi": TilingBlendCase(_SPATIAL_12_8),
    "AutoencoderKLWan": TilingBlendCase(_SPATIAL_12_8),
    "AutoencoderKLCogVideoX": TilingBlendCase(
        {
            "tile_sample_min_height": 16,
            "tile_sample_min_width": 16,
            "tile_latent_min_height": 2,
            "tile_latent_min_width": 2,
            "tile_overlap_factor_height": 0.5,
            "tile_overlap_factor_width": 0.5,
        },
        inputs=_sample("(1, 3, 8, 32, 32)"),
        reason="32x32 frames: " + _TOO_SMALL,
    ),
    "AutoencoderKLLTX2Video": TilingBlendCase(
        _SPATIAL_32_24 | {"tile_sample_min_num_frames": 16, "tile_sample_stride_num_frames": 8} | _FRAMEWISE,
        inputs=_sample("(1, 3, 17, 48, 48)"),
        reason="17 frames of 48x48: " + _TOO_SMALL,
    ),
    "AutoencoderKLMagvit": TilingBlendCase(
        _SPATIAL_32_24, inputs=_sample("(1, 3, 9, 48, 48)"), reason="48x48 frames: " + _TOO_SMALL
    ),
    "AutoencoderVidTok": TilingBlendCase(
        {
            "tile_sample_min_height": 32,
            "tile_sample_min_width": 32,
            "tile_latent_min_height": 2,
            "tile_latent_min_width": 2,
            "tile_overlap_factor_height": 0.25,
            "tile_overlap_factor_width": 0.25,
        },
        init='return {**super().get_init_dict(), "ch": 8}',
        inputs=_sample("(1, 3, 8, 48, 48)"),
        reason="8 base channels and 48x48 frames: tiling the 128-channel config takes a minute on a CPU.",
    ),
    "LTX2VideoDiffusionDecoderModel": TilingBlendCase(
        _SPATIAL_32_24 | {"tile_sample_min_num_frames": 8, "tile_sample_stride_num_frames": 6},
        inputs="z = randn_tensor((1, 8, 2, 3, 3), generator=self.generator, device=torch_device)\n"
        'return {"z": z, "generator": self.generator}',
        reason="One latent video: each tiled decode denoises every tile, two videos double the time.",
    ),
}
"""Per class: the tile settings (and, where the config's dummy inputs are too small, the inputs) that reach its
blends with upstream's tiny config. Measured on upstream main (2026-08)."""


def _replace_or_append(
    lines: list[str], tree: ast.Module, name: str, text: str, after: int | None, newline: str
) -> list[str]:
    """Replace the top-level class or function `name` by `text`, or insert `text` after line `after` (None: at the
    end); the lines added end with `newline`."""
    new = split_lines(with_newline(text, newline))
    definitions = (ast.ClassDef, ast.FunctionDef)
    existing = [node for node in tree.body if isinstance(node, definitions) and node.name == name]
    if existing:
        node = existing[0]
        first = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
        return lines[:first] + new + lines[node.end_lineno :]
    if after is None:
        after = len(lines)
        while after and not lines[after - 1].strip():
            after -= 1
        return lines[:after] + [newline, newline, *new]
    return lines[:after] + [newline, newline, *new] + lines[after:]


def _with_import(
    lines: list[str], tree: ast.Module, module: str, level: int, names: tuple[str, ...], newline: str
) -> list[str]:
    """Add `names` to the file's `from <level dots><module> import ...` (one without aliases), or add that import
    after the last import; the lines added end with `newline`."""
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    local = [node for node in imports if isinstance(node, ast.ImportFrom) and node.level == level]
    local = [node for node in local if node.module == module and not any(alias.asname for alias in node.names)]
    statement = f"from {'.' * level}{module} import"
    if not local:
        after = imports[-1].end_lineno
        return lines[:after] + [f"{statement} {', '.join(sorted(names))}{newline}"] + lines[after:]
    node = local[0]
    present = [alias.name for alias in node.names]
    if set(names) <= set(present):
        return lines
    merged = sorted({*present, *names}, key=lambda name: (not name.isupper(), not name[0].isupper(), name.lower()))
    line = f"{statement} {', '.join(merged)}"
    if len(line) > LINE_LENGTH or node.end_lineno > node.lineno:
        block = [f"{statement} ({newline}", *[f"    {name},{newline}" for name in merged], f"){newline}"]
    else:
        block = [line + newline]
    return lines[: node.lineno - 1] + block + lines[node.end_lineno :]


def _config_classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    """Model class name -> the first `<Model>TesterConfig` class of the file whose `model_class` returns it."""
    configs = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "model_class":
                returns = [stmt.value for stmt in item.body if isinstance(stmt, ast.Return)]
                if returns and isinstance(returns[0], ast.Name):
                    configs.setdefault(returns[0].id, node)
    return configs


def _slicing_tiling_end(tree: ast.Module, config: str) -> int | None:
    """Last line of the file's class composing `config` with `AutoencoderTesterMixin`, or None."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = [base.id for base in node.bases if isinstance(base, ast.Name)]
            if config in bases and "AutoencoderTesterMixin" in bases:
                return node.end_lineno
    return None


TestFileEdits = dict[Path, tuple[SourceFile, str]]


def plan_test_files(root: Path, classes: set[str]) -> tuple[TestFileEdits, dict[str, str | None]] | None:
    """Plan the edits for the rewritten `classes` in the checkout at `root`, or return None when it does not have
    upstream's tester-mixin layout (no `AutoencoderTesterMixin` in its testing_utils.py).

    Returns ({path: (the file as read, new text)} for testing_utils.py and every test file that gets a test class,
    {class name: the test class added for it, or None when the class has no upstream test file or no case}). Each
    file keeps its line endings; the lines added take the file's dominant one. Raises `RewriteError` for a file that
    does not parse.
    """
    utils_path = root / TESTING_UTILS
    if not utils_path.is_file():
        return None
    source = read_source(utils_path)
    if "class AutoencoderTesterMixin" not in source.text:
        return None
    tree = parse_source(source.text, utils_path)
    lines = _with_import(split_lines(source.text), tree, "testing_utils", 3, TESTING_UTILS_IMPORTS, source.newline)
    for name, text in ((REFERENCE_NAME, REFERENCE), (MIXIN_NAME, MIXIN)):
        lines = _replace_or_append(lines, ast.parse("".join(lines)), name, text, None, source.newline)
    edits = {utils_path: (source, "".join(lines))}
    added: dict[str, str | None] = dict.fromkeys(sorted(classes))
    for path in sorted((root / TESTS).glob("test_*.py")):
        source = read_source(path)
        if "model_class" not in source.text:
            continue
        tree = parse_source(source.text, path)
        new, touched = source.text, False
        written = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        for model, config in _config_classes(tree).items():
            name = f"Test{model}{TEST_CLASS_SUFFIX}"
            # A test class an earlier run added is refreshed too: after `--inherit` its model has no blend method left.
            if (model not in classes and name not in written) or model not in CASES or added.get(model) is not None:
                continue
            text = test_class(model, config.name, CASES[model])
            if touched:  # a test class was added: the edited text's own tree has the new positions
                tree = ast.parse(new)
            lines = _replace_or_append(
                split_lines(new), tree, name, text, _slicing_tiling_end(tree, config.name), source.newline
            )
            new = "".join(
                _with_import(lines, ast.parse("".join(lines)), "testing_utils", 1, (MIXIN_NAME,), source.newline)
            )
            added[model], touched = name, True
        if touched:
            edits[path] = (source, new)
    return edits, added
