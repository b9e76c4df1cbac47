"""The pull-request generator: `tileblend rewrite` and the tools that judge and describe its change to diffusers.

- `rewrite`: plans and writes the whole rewrite of a diffusers tree (`tileblend rewrite`).
- `model_files`: the edits of one autoencoder file (its loops become the vectorized blend, or are deleted).
- `blend_methods`: the text of the vectorized `blend_v/h/t` the rewrite writes, from `tileblend.blend`.
- `test_files`, `test_text`, `test_cases`, `standalone_test`: the tests the rewrite adds to upstream's tests.
- `edits`: the one line-edit engine (and import formatter) behind every file the rewrite changes.
- `source_files`: reading source files as Python does, keeping their bytes.
- `transaction`: all-or-nothing writing of files, rolled back after a signal or by the next run after a kill.
- `copies`: the "Copied from" checker for trees without upstream's (`utils/check_copies.py`).
- `check`: judges the rewrite with upstream's own tools on copies of a checkout (`make upstream-check`).
- `pr`: writes the rewrite and drafts the coordination issue and the PR description (`make upstream-pr`).
- `change_digest`: the fingerprint of a rewrite, matching a GPU run's rewritten checkout to the one `pr` writes.
- `simple_blend`: the exact blend against the simple one on real-size tiled decodes (`make exact-vs-simple`).
- `tiled_vae_benchmark`: the stock-diffusers benchmark script the PR asks maintainers to rerun.
- `bugs`: the bugs in diffusers' tiled paths, reproduced and drafted as issues (`make upstream-bugs`).
"""
