"""Benchmarks: `tileblend bench blend` (the seam alone), and end-to-end decode and pipeline benchmarks."""
