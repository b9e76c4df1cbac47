# Contributor commands, as upstream: make style, make quality, make fix-copies, make test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHECK_DIRS := setup.py src tests utils examples

VERSION_TESTS := tests/test_blend_contract.py tests/test_blend_properties.py tests/test_patch.py tests/test_run.py \
	tests/test_verify.py tests/test_models_tiled_parity.py tests/test_models_registry.py tests/test_recognize.py \
	tests/test_rewrite.py tests/test_compile.py

.PHONY: test-floor test-newest install demo durations test style quality bench fix-copies upstream-pr upstream-check upstream-bugs upstream-snapshot exact-vs-simple results gpu-check launches

$(STAMP): setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# The main job: bitwise parity of every patched diffusers blend on this machine's CPU, then tiled encode and decode of
# four tiny models (an image VAE, two video VAEs, one with frame seams) and their row-streamed tiled decode; ALL=1: all
# 19 (`tileblend verify`).
DEMO_MODELS := kl wan cogvideox ltx2-video
demo: install
	$(BIN)/tileblend verify --device cpu $(if $(ALL),,--models $(DEMO_MODELS))

# How long the documented commands take here (wall, CPU seconds, load, work): the table of docs/results.md.
durations: install
	$(BIN)/python utils/durations.py --write docs/results.md

test: install
	@echo "make test: the whole suite, about 1,350 CPU seconds in a measured run (README.md); pytest prints a dot per test"
	$(BIN)/python -m pytest -n 2 --dist loadgroup tests

# The other supported versions (docs/usage.md#supported-versions), each in its own venv: the floor (constraints-floor.txt)
# and the newest releases a fresh `pip install` gets. They run VERSION_TESTS (blend contract and properties, the patch
# on stock diffusers, verify, the rewrite of that diffusers' own tree, torch.compile) and `make demo`'s command.
.venv-floor/.installed: setup.py constraints-floor.txt
	test -x .venv-floor/bin/python || $(PYTHON) -m venv .venv-floor
	.venv-floor/bin/python -m pip install --quiet --upgrade pip
	.venv-floor/bin/python -m pip install --quiet -c constraints-floor.txt -e ".[dev]"
	touch $@

test-floor: .venv-floor/.installed
	.venv-floor/bin/python -m pytest -n 2 --dist loadgroup $(VERSION_TESTS)
	.venv-floor/bin/tileblend verify --device cpu --no-progress

# PIP_CONSTRAINT=/dev/null: a pip configuration that caps torch (this project's machines cap it at the release on
# their disk) would keep this venv from the newest release; the cap is lifted for this venv only.
.venv-newest/.installed: setup.py
	test -x .venv-newest/bin/python || $(PYTHON) -m venv .venv-newest
	.venv-newest/bin/python -m pip install --quiet --upgrade pip
	PIP_CONSTRAINT=/dev/null .venv-newest/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager -e ".[dev]"
	touch $@

test-newest: .venv-newest/.installed
	.venv-newest/bin/python -m pytest -n 2 --dist loadgroup $(VERSION_TESTS)
	.venv-newest/bin/tileblend verify --device cpu --no-progress

style: install
	$(BIN)/ruff check --fix $(CHECK_DIRS)
	$(BIN)/ruff format $(CHECK_DIRS)

quality: install
	$(BIN)/ruff check $(CHECK_DIRS)
	$(BIN)/ruff format --check $(CHECK_DIRS)

bench: install
	$(BIN)/tileblend bench blend

# Rewrite "# Copied from diffusers..." copies from their sources in DIFFUSERS=path. This repository holds no copies:
# `tileblend rewrite` writes (and a rerun refreshes) the ones it adds to diffusers. A checkout is fixed by its own
# utils/check_copies.py, as upstream's `make fix-copies` does; ours is for trees without it (an installed package).
# Either runs after a tileblend write that was killed is rolled back (tileblend.upstream.transaction).
fix-copies: install
ifneq ($(DIFFUSERS),)
	$(BIN)/python -m tileblend.upstream.transaction "$(DIFFUSERS)"
	if [ -f "$(DIFFUSERS)/utils/check_copies.py" ]; then \
		cd "$(DIFFUSERS)" && PATH="$(CURDIR)/$(BIN):$$PATH" python utils/check_copies.py --fix_and_overwrite; \
	else \
		$(BIN)/python utils/check_copies.py --path "$(DIFFUSERS)" --fix_and_overwrite; \
	fi
else
	@echo "this repository holds no copies; they live in a diffusers checkout: make fix-copies DIFFUSERS=path"
endif

# The upstream pull request: rewrite the pristine diffusers checkout DIFFUSERS=path (INHERIT=1: the --inherit layout),
# check its copies (tileblend.upstream.copies), run ruff on the touched files, and print the drafts of the coordination
# issue and, with ISSUE=N (its number), of the PR description and its benchmark script (docs/upstream-pr.md). It needs
# the JSON of `make upstream-check` and of `make exact-vs-simple`, and for the PR description that of a `make gpu-check`
# on CUDA (out/gpu-check/summary.json). BRANCH=url: the branch holding the same change (a rewritten copy of the
# checkout, pushed), which the drafts link.
upstream-pr: install
	@test -n "$(DIFFUSERS)" || { echo "usage: make upstream-pr DIFFUSERS=path/to/diffusers-checkout BRANCH=https-url [INHERIT=1] [ISSUE=N]"; exit 2; }
	$(BIN)/python utils/upstream_pr.py $(DIFFUSERS) --branch "$(BRANCH)" $(if $(INHERIT),--inherit) $(if $(ISSUE),--issue $(ISSUE)) \
		--check-json out/upstream-check.json \
		--exactness-json $(or $(wildcard out/exact-vs-simple.json),docs/results/exact-vs-simple.json) \
		$(if $(wildcard out/gpu-check/summary.json),--gpu-json out/gpu-check/summary.json)

# The coordination issue's exact vs simple blend table: real-size tiled decodes on the CPU (SD v1's VAE at 1024x1024 in
# 512- and 768-pixel tiles, Wan 2.1's at 17 frames of 480x832), the blends in float16 and bfloat16.
# docs/results/exact-vs-simple.json holds the committed run, which `make upstream-pr` reads when out/ has none.
exact-vs-simple: install
	mkdir -p out
	$(BIN)/python utils/exact_vs_simple.py --json out/exact-vs-simple.json

# Upstream diffusers main at the pinned commit, downloaded from GitHub and checked (utils/upstream_snapshot.py): the
# tree the upstream tests judge the rewrite on, written to upstream-snapshot/ (ignored). Without network it says where
# to save the download.
upstream-snapshot:
	$(PYTHON) utils/upstream_snapshot.py

# Judge the rewrite with upstream's own tools on copies of DIFFUSERS=path (a checkout or a .tar.gz of one):
# check_copies.py, ruff, and tests/models/autoencoders (-k "tiling or slicing or blend"; FULL=1: all of it) on a
# pristine and a rewritten copy (INHERIT=1: the --inherit layout), then the added tests against a broken blend.
# Writes out/upstream-check.json.
upstream-check: install
	@test -n "$(DIFFUSERS)" || { echo "usage: make upstream-check DIFFUSERS=path/to/diffusers [FULL=1] [INHERIT=1]"; exit 2; }
	mkdir -p out
	$(BIN)/python utils/upstream_check.py $(DIFFUSERS) $(if $(FULL),--full) $(if $(INHERIT),--inherit) \
		--broken-blend --json out/upstream-check.json

# Reproduce the upstream bugs in diffusers' tiled paths (one standalone script each) on the installed diffusers and,
# with UPSTREAM=path (a checkout or a .tar.gz of one), on that tree; writes their issue drafts into out/upstream-bugs/.
upstream-bugs: install
	$(BIN)/python utils/upstream_bugs.py $(if $(UPSTREAM),--upstream $(UPSTREAM)) --out out/upstream-bugs

# The launch-cost estimate without a GPU (docs/benchmarks.md): host dispatch of the blends per real-size decode.
launches: install
	mkdir -p out
	$(BIN)/tileblend bench launches --json out/launches.json

# Regenerate docs/results.md: runs the end-to-end benchmarks of DEVICE (default cpu; cuda on a GPU machine).
results: install
	$(BIN)/python utils/make_results.py --device $(or $(DEVICE),cpu)

# GPU validation in one command, with the machine's own Python (torch with CUDA). Packages it lacks (diffusers...)
# are installed from the wheel folder WHEELS=DIR. MODELS="image=ID[:SUBFOLDER] video=ID[:SUBFOLDER]": real
# checkpoints for the decode benchmarks (default: random-weight presets). UPSTREAM=path (a pristine diffusers checkout
# or .tar.gz; needed on CUDA; INHERIT=1 for that layout): the PR's added tests and benchmark script on main and on the
# branch. DEVICE=cpu runs every step at tiny sizes. Outputs: out/gpu-check/ (summary.md, summary.json for
# `make upstream-pr`).
gpu-check:
	$(PYTHON) utils/gpu_check.py --device $(or $(DEVICE),cuda) $(if $(WHEELS),--wheels $(WHEELS)) \
		$(if $(MODELS),--models $(MODELS)) $(if $(UPSTREAM),--upstream $(UPSTREAM)) $(if $(INHERIT),--inherit)
