# Contributor commands, as upstream: make style, make quality, make fix-copies, make test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHECK_DIRS := setup.py src tests utils examples

.PHONY: install demo test style quality bench fix-copies upstream-pr results gpu-check

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

# Rewrite "# Copied from diffusers..." copies from their sources: in this repository (against the installed
# diffusers) and, with DIFFUSERS=path, in that diffusers checkout.
fix-copies: install
	$(BIN)/python utils/check_copies.py --path . --fix_and_overwrite
ifneq ($(DIFFUSERS),)
	$(BIN)/python utils/check_copies.py --path $(DIFFUSERS) --fix_and_overwrite
endif

# The upstream pull request: rewrite the diffusers checkout DIFFUSERS=path, fix its copies, run ruff on the touched
# files, and print a summary and the PR description (docs/upstream-pr.md).
upstream-pr: install
	@test -n "$(DIFFUSERS)" || { echo "usage: make upstream-pr DIFFUSERS=path/to/diffusers-checkout"; exit 2; }
	PYTHONPATH=src $(BIN)/python utils/upstream_pr.py $(DIFFUSERS)
