# Everything runs from the project's own virtualenv (.venv), created on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-slow test-browser test-oracle test-paddle paddle screenshots bench install clean

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

install: $(BIN)/.installed

# The main job: ZeRO-1 of a real Paddle training program (dp x mp MLP, AdamW) and its startup
# program, lowered for rank 0, as Paddle 3.3.1 would run it.
demo: $(BIN)/.installed
	mkdir -p build/demo
	$(BIN)/distc shard samples/mlp_dp2mp2_adamw.ir --rank 0 -o build/demo/mlp_dp2mp2_adamw.zero1.r0.ir \
	    --startup samples/mlp_dp2mp2_adamw.startup.ir --startup-out build/demo/mlp_dp2mp2_adamw.startup.zero1.r0.ir
	@echo "wrote build/demo/mlp_dp2mp2_adamw.zero1.r0.ir and build/demo/mlp_dp2mp2_adamw.startup.zero1.r0.ir"
	@grep -c '' build/demo/mlp_dp2mp2_adamw.zero1.r0.ir | xargs echo "lines in the rank-0 program:"

# pytest-xdist: one worker a core (at most 4); what runs is set in pyproject.toml (addopts): not tests/oracle,
# tests/browser, nor the tests marked slow
XDIST := -n auto --maxprocesses 4

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q $(XDIST)

# The rest of the matrices `make test` samples (marked slow): a signal at every point of every writing
# command, every I/O fault of every command, ... (minutes)
test-slow: $(BIN)/.installed
	$(BIN)/python -m pytest -q $(XDIST) -m slow

# Whole matrices of stored Paddle programs too long for `make test` (minutes): every rank of every
# tensor-fusion case and of every pipeline-schedule / gradient-merge configuration, distc verify on
# every stored model set and stage, `distc fmt --check` on every program dump stored in the
# repository (tests/oracle).
test-oracle: $(BIN)/.installed
	$(BIN)/python -m pytest -q -o addopts=-ra tests/oracle

# The report and diff pages in headless Chromium (Debian's chromium + chromium-driver, not pip's):
# no console errors, every chart drawn with the right number of bars/cells/jobs; screenshots and
# pages in build/browser (CI artifacts).
$(BIN)/.browser: $(BIN)/.installed
	$(BIN)/python -m pip install -q -e '.[browser]'
	touch $@

test-browser: $(BIN)/.browser
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	    { echo "test-browser needs chromium and chromedriver: apt-get install chromium chromium-driver"; exit 1; }
	$(BIN)/python -m pytest -q -o addopts=-ra tests/browser

# The README's pictures (samples/screenshots), made by the browser test (made smaller by
# Debian's pngquant when it is there).
screenshots: $(BIN)/.browser
	DISTC_SCREENSHOTS=samples/screenshots $(BIN)/python -m pytest -q -o addopts=-ra tests/browser
	! command -v pngquant >/dev/null || pngquant --quality 70-95 --speed 1 --force --ext .png samples/screenshots/*.png

# distc capture against real Paddle: its own virtualenv with paddlepaddle 3.3.1 (CPU), never a
# dependency of distc; captures samples/train_*.py and checks the files and distc shard on them
PADDLE_VENV ?= .venv-paddle
$(PADDLE_VENV)/bin/.installed:
	test -x $(PADDLE_VENV)/bin/python || $(PYTHON) -m venv $(PADDLE_VENV)
	$(PADDLE_VENV)/bin/python -m pip install -q paddlepaddle==3.3.1 "numpy<2.3"
	touch $@

paddle: $(PADDLE_VENV)/bin/.installed  # the interpreter for `distc capture -- .venv-paddle/bin/python train.py`

test-paddle: $(BIN)/.installed $(PADDLE_VENV)/bin/.installed
	DISTC_PADDLE_PYTHON=$(abspath $(PADDLE_VENV)/bin/python) $(BIN)/python -m pytest -q tests/paddle

bench: $(BIN)/.installed
	$(BIN)/python bench/bench_parse.py

clean:
	rm -rf $(VENV) $(PADDLE_VENV) build dist *.egg-info
