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

# The main job: ZeRO-1 of a real Paddle training program (dp x mp MLP, AdamW) and its startup
# program, lowered for rank 0, as Paddle 3.3.1 would run it.
demo: $(BIN)/.installed
	mkdir -p build/demo
	$(BIN)/distc shard samples/mlp_dp2mp2_adamw.ir --rank 0 -o build/demo/mlp_dp2mp2_adamw.zero1.r0.ir \
	    --startup samples/mlp_dp2mp2_adamw.startup.ir --startup-out build/demo/mlp_dp2mp2_adamw.startup.zero1.r0.ir
	@echo "wrote build/demo/mlp_dp2mp2_adamw.zero1.r0.ir and build/demo/mlp_dp2mp2_adamw.startup.zero1.r0.ir"
	@grep -c '' build/demo/mlp_dp2mp2_adamw.zero1.r0.ir | xargs echo "lines in the rank-0 program:"

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q

bench: $(BIN)/.installed
	$(BIN)/python bench/bench_parse.py

clean:
	rm -rf $(VENV) build dist *.egg-info
