# Everything runs from the project's own virtualenv (.venv), created on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test bench install clean

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

install: $(BIN)/.installed

demo: $(BIN)/.installed
	$(BIN)/distc fmt samples/mlp_dp2mp2_adamw.ir --check
	$(BIN)/distc fmt samples/mlp_dp2mp2_adamw.ir | head -c 2000

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q

bench: $(BIN)/.installed
	$(BIN)/python bench/bench_parse.py

clean:
	rm -rf $(VENV) build dist *.egg-info
