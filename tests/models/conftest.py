"""Settings for the tiny-model tests: one intra-op thread per pytest-xdist worker, so workers do not oversubscribe."""

import os

import torch


if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)
