# The README's two commands. Both set up the environment first (uv, bootstrapped with pip when
# missing; Python 3.11; exact versions from uv.lock).
SHELL := /bin/bash
UV := $(shell command -v uv 2>/dev/null || echo .bootstrap/bin/uv)
CORES ?= 4

.PHONY: report test setup lint clean

setup: .venv/.synced

$(UV):
	python3 -m venv .bootstrap
	.bootstrap/bin/pip install --quiet uv

.venv/.synced: pyproject.toml uv.lock | $(UV)
	$(UV) sync --locked --extra slurm --compile-bytecode
	touch $@

report: setup
	$(UV) run --no-sync snakemake --cores $(CORES) reports/summary.html

test: setup
	$(UV) run --no-sync pytest

lint: setup
	$(UV) run --no-sync ruff check .

clean:
	rm -rf data/counters data/ceilings data/classified data/kernels data/diagnostics reports logs .snakemake
