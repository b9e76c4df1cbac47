# Contributor commands, as upstream: make style, make quality, make fix-copies, make test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHECK_DIRS := setup.py src tests utils examples

.PHONY: install demo test style quality bench fix-copies upstream-pr upstream-check results gpu-check launches

$(STAMP): setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# The main job: bitwise parity of every patched diffusers blend on this machine's CPU.
demo: install
	$(BIN)/tileblend verify --device cpu

test: install
	$(BIN)/python -m pytest -n 2 tests

style: install
	$(BIN)/ruff check --fix $(CHECK_DIRS)
	$(BIN)/ruff format $(CHECK_DIRS)

quality: install
	$(BIN)/ruff check $(CHECK_DIRS)
	$(BIN)/ruff format --check $(CHECK_DIRS)

bench: install
	$(BIN)/tileblend bench blend

# Rewrite "# Copied from diffusers..." copies from their sources in the diffusers checkout DIFFUSERS=path. This
# repository holds no copies: `tileblend rewrite` writes (and a rerun refreshes) the ones it adds to diffusers.
fix-copies: install
ifneq ($(DIFFUSERS),)
	$(BIN)/python utils/check_copies.py --path $(DIFFUSERS) --fix_and_overwrite
else
	@echo "this repository holds no copies; they live in a diffusers checkout: make fix-copies DIFFUSERS=path"
endif

# The upstream pull request: rewrite the pristine diffusers checkout DIFFUSERS=path (INHERIT=1: the --inherit layout),
# check its copies with utils/check_copies.py, run ruff on the touched files, and print the drafts of the coordination
# issue and of the PR description (docs/upstream-pr.md). The numbers of the last `make upstream-check`
# (out/upstream-check.json) and of a `make gpu-check` on CUDA (out/gpu-check/summary.json) go into the description.
upstream-pr: install
	@test -n "$(DIFFUSERS)" || { echo "usage: make upstream-pr DIFFUSERS=path/to/diffusers-checkout [INHERIT=1]"; exit 2; }
	PYTHONPATH=src $(BIN)/python utils/upstream_pr.py $(DIFFUSERS) $(if $(INHERIT),--inherit) \
		$(if $(wildcard out/upstream-check.json),--check-json out/upstream-check.json) \
		$(if $(wildcard out/gpu-check/summary.json),--gpu-json out/gpu-check/summary.json) \
		$(if $(wildcard out/launches.json),--launches-json out/launches.json)

# Judge the rewrite with upstream's own tools on copies of DIFFUSERS=path (a checkout or a .tar.gz of one):
# check_copies.py, ruff, and tests/models/autoencoders (-k "tiling or slicing or blend"; FULL=1: all of it) on a
# pristine and a rewritten copy (INHERIT=1: the --inherit layout), then the added tests against a broken blend.
# Writes out/upstream-check.json.
upstream-check: install
	@test -n "$(DIFFUSERS)" || { echo "usage: make upstream-check DIFFUSERS=path/to/diffusers [FULL=1] [INHERIT=1]"; exit 2; }
	mkdir -p out
	PYTHONPATH=src $(BIN)/python utils/upstream_check.py $(DIFFUSERS) $(if $(FULL),--full) $(if $(INHERIT),--inherit) \
		--broken-blend --json out/upstream-check.json

# The launch-cost estimate without a GPU (docs/benchmarks.md): host dispatch of the blends per real-size decode.
launches: install
	mkdir -p out
	$(BIN)/tileblend bench launches --json out/launches.json

# Regenerate docs/results.md: runs the end-to-end benchmarks of DEVICE (default cpu; cuda on a GPU machine).
results: install
	PYTHONPATH=src $(BIN)/python utils/make_results.py --device $(or $(DEVICE),cpu)

# GPU validation in one command, with the machine's own Python (torch with CUDA). Packages it lacks (diffusers...)
# are installed from the wheel folder WHEELS=DIR. MODELS="image=ID[:SUBFOLDER] video=ID[:SUBFOLDER]": real
# checkpoints for the decode benchmarks (default: random-weight presets). DEVICE=cpu runs every step at tiny sizes.
# Outputs: out/gpu-check/ (summary.md, summary.json for `make upstream-pr`).
gpu-check:
	PYTHONPATH=src $(PYTHON) utils/gpu_check.py --device $(or $(DEVICE),cuda) $(if $(WHEELS),--wheels $(WHEELS)) \
		$(if $(MODELS),--models $(MODELS))
