# Two commands for a newcomer: `make campaign` and `make test`.  Each sets itself up.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup engines test test-all campaign bench clean

setup: $(STAMP)

# Per-engine environments (MNN; TensorFlow/TFLite via onnx2tf), created once under ~/.cache/ofuzz.
engines: setup
	$(VENV)/bin/ofuzz engines --install all

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,ray]"
	touch $(STAMP)

test: engines
	OFUZZ_REQUIRE_ENGINES=1 $(PY) -m pytest -q

test-all: setup
	$(PY) -m pytest -q -m "slow or not slow"

campaign: engines
	$(VENV)/bin/ofuzz campaign --budget 5m --reduce-time 5m

bench: setup
	$(PY) scripts/bench_generate.py

clean:
	rm -rf $(VENV) runs models
