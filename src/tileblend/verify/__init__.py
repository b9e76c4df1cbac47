"""`tileblend verify`: check on this machine that tileblend's blends equal diffusers' loops bit for bit.

Two levels of checks, both comparing bits (`tileblend.compare.bitwise_equal`: infinities, signed zeros and subnormals
included):

- methods (`--quick` runs only these): for each loop blend that `tileblend.enable()` would patch, and each dtype, the
  original method and its vectorized replacement run on the same random tiles of that model's rank, over extents that
  are clamped, clipped by a shorter tile, zero and negative, with special values and a non-contiguous tile.
- whole models: for each tiny model of `tileblend.tiny_models` (one per diffusers class with loop blends), tiled encode and
  tiled decode run once with the loops and once with tileblend enabled on the same input; the outputs must be
  identical, the blend methods the registry declares for that path must have been called, and the tileblend run must
  make the same blend calls as the loop run. On CUDA, the vectorized path is also captured in a CUDA graph and
  replayed on new inputs, each replay equal to eager execution.

Nothing is timed: verify is about exactness (`tileblend bench` measures speed, with its spread and the load).

Modules: `method_checks`, `model_checks`, `tables` (what is printed) and `cli` (the options and the exit code).
"""
