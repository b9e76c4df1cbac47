"""Benchmarks: `tileblend bench blend` (the seam alone), end-to-end decode and pipeline benchmarks, and
`tileblend bench compile` (torch.compile of a tiled decode)."""
