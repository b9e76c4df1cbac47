"""The row-streaming walk: a tiled decode that blends each tile as soon as it is decoded, in diffusers' order, and
copies its crop into an output allocated once, so that the tiles are never all alive together.

diffusers' tiled decodes keep every decoded tile, then every blended row, then the output: about four outputs' worth
of memory at the final `torch.cat`. The walk keeps one output, two tiles and the last blend rows of the tile row
above, and returns the same bits:

- tiles are decoded by the model's own calls (`decode_tile`), one at a time, in the stock order (rows of columns);
- tile (i, j) is blended as the stock loop blends it, with the model's own methods and the same arguments:
  `blend_v(tile above, tile, blend_height)` for i > 0, then `blend_h(tile to the left, tile, blend_width)` for j > 0.
  The decoder never reads a blended tile, so blending early changes nothing. The tile above is passed as its last
  `min(height, blend_height)` rows, all that a blend reads of it (its extent is `min` of both heights and the one
  asked for, counted from the end): the blend sees the same extent and values;
- the crop `tile[..., :crop_height, :crop_width]` of each blended tile is copied into the output at its place; the
  output is cut to `height` x `width` where the stock decode cuts it.

Each decoded tile is copied into one of two tile slots, and the rows kept from the tile row above into one strip
buffer; both are allocated once, with the output, when the first tile is decoded (long-lived small tensors between a
decoder's activations would fragment the heap). Writing into them copies values, which changes no bit.
"""

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Grid:
    """The tiles of one tiled decode, as the stock code lays them out.

    Args:
        rows, cols: the latent offsets of the tile rows and columns (`range(0, latent size, latent stride)`).
        tile_height, tile_width: the latent size of a whole tile (edge tiles are cut by the latent's end).
        blend_height, blend_width: the extents the stock code passes to `blend_v` and `blend_h`.
        crop_height, crop_width: how much of each blended tile the stock code keeps, from its top-left corner.
        height, width: where the stock code cuts the assembled output, or None where it does not.
    """

    rows: range
    cols: range
    tile_height: int
    tile_width: int
    blend_height: int
    blend_width: int
    crop_height: int
    crop_width: int
    height: int | None = None
    width: int | None = None


def decode_rows(model, grid: Grid, decode_tile) -> torch.Tensor:
    """Decode, blend and assemble the tiles of `grid`: the tensor the stock tiled decode assembles, bit for bit.

    `decode_tile(i, j)` decodes the tile at latent offset (i, j) with the model's own calls and returns it, spatial
    dimensions last; it is called once per tile, in the stock order. `model.blend_v` and `model.blend_h` blend.

    Raises:
        RuntimeError: a tile's size is not its latent size times the first tile's scale (a decoder that does not scale
            every tile alike; the known ones all do).
    """
    latent_heights = [min(grid.tile_height, grid.rows.stop - i) for i in grid.rows]
    latent_widths = [min(grid.tile_width, grid.cols.stop - j) for j in grid.cols]
    output = slots = strips = None
    y = 0
    for row, i in enumerate(grid.rows):
        x, left = 0, None
        for column, j in enumerate(grid.cols):
            decoded = decode_tile(i, j)
            if output is None:
                scale = _scale(decoded, latent_heights[0], latent_widths[0])
                output, slots, strips = _allocate(decoded, grid, scale, latent_heights, latent_widths)
            expected = (latent_heights[row] * scale[0], latent_widths[column] * scale[1])
            if tuple(decoded.shape[-2:]) != expected:
                raise RuntimeError(f"tile ({i}, {j}) decoded to {tuple(decoded.shape[-2:])}, not {expected}")
            tile = slots[column % 2][..., : expected[0], : expected[1]]
            tile.copy_(decoded)
            del decoded
            kept = tile  # what the stock code keeps in its rows: the neighbours' blends read it
            if row > 0:
                tile = model.blend_v(
                    above(strips, column, latent_heights[row - 1] * scale[0], expected[1]), tile, grid.blend_height
                )
            if column > 0:
                tile = model.blend_h(left, tile, grid.blend_width)
            crop = tile[..., : grid.crop_height, : grid.crop_width]
            target = output[..., y : y + crop.shape[-2], x : x + crop.shape[-1]]
            target.copy_(crop[..., : target.shape[-2], : target.shape[-1]])
            x += crop.shape[-1]
            if row + 1 < len(grid.rows):
                strip_height = max(0, min(expected[0], grid.blend_height))
                strips[column][..., :strip_height, : expected[1]].copy_(kept[..., expected[0] - strip_height :, :])
            left = kept
        y += crop.shape[-2]
    return output


def above(strips: torch.Tensor, column: int, height: int, width: int) -> torch.Tensor:
    """The kept last rows of the tile above in `column` (`height` x `width` before it was cut to its strip)."""
    strip = strips[column]
    return strip[..., : min(height, strip.shape[-2]), :width]


def _scale(decoded: torch.Tensor, latent_height: int, latent_width: int) -> tuple[int, int]:
    height, width = decoded.shape[-2:]
    if height % latent_height or width % latent_width:
        raise RuntimeError(f"the first tile decoded to {height}x{width}, no whole multiple of its latent size")
    return height // latent_height, width // latent_width


def _allocate(first: torch.Tensor, grid: Grid, scale, latent_heights, latent_widths):
    """The output, the two tile slots and the strip buffer, sized from the first (largest) tile."""
    height = sum(min(grid.crop_height, h * scale[0]) for h in latent_heights)
    width = sum(min(grid.crop_width, w * scale[1]) for w in latent_widths)
    if grid.height is not None:
        height = min(height, grid.height)
    if grid.width is not None:
        width = min(width, grid.width)
    leading = tuple(first.shape[:-2])
    new = {"dtype": first.dtype, "device": first.device}
    output = torch.empty(leading + (height, width), **new)
    slots = torch.empty((min(2, len(latent_widths)),) + tuple(first.shape), **new)
    strip_height = max(0, min(first.shape[-2], grid.blend_height)) if len(latent_heights) > 1 else 0
    strips = torch.empty((len(latent_widths),) + leading + (strip_height, first.shape[-1]), **new)
    return output, slots, strips
