# kernelwright: `make demo` runs the main job (optimize) offline; `make test` runs the tests. Both set up first.
# TORCH_SPEC selects the torch build: the default is the CPU build these machines have. On a GPU machine use
#   make setup TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128" EXTRAS=test,gpu
# or TORCH_SPEC=skip to keep a torch that is already installed in the interpreter (`PYTHON=...`).
PYTHON ?= python3
TORCH_SPEC ?= torch==2.13.0
# EXTRAS=test,gpu on a GPU machine adds NVML telemetry (nvidia-ml-py)
EXTRAS ?= test
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo demo-model test test-gpu gpu-check bench bench-fidelity bench-hardening bench-sweep bench-smoke clean

setup: $(STAMP)

# TORCH_SPEC=skip: the interpreter's own packages (torch included) are used as they are, with no download when
# they already satisfy the project (a GPU machine without internet). A .pth file adds the interpreter's
# site-packages: where PYTHON is itself a venv (the GPU image's /opt/torch/.venv), --system-site-packages alone
# reaches the base Python's packages, not that venv's torch (measured on an H100, 2026-11-27)
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(if $(filter skip,$(TORCH_SPEC)),--system-site-packages,) $(VENV)
	$(if $(filter skip,$(TORCH_SPEC)),$(PYTHON) -c "import site; print(chr(10).join(site.getsitepackages()))" \
		> "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_interpreter_site.pth",)
	$(if $(filter skip,$(TORCH_SPEC)),,$(BIN)/python -m pip install -q --upgrade pip)
	$(if $(filter skip,$(TORCH_SPEC)),,$(BIN)/python -m pip install -q $(TORCH_SPEC))
	$(BIN)/python -m pip install -q $(if $(filter skip,$(TORCH_SPEC)),--no-build-isolation,) -e '.[$(EXTRAS)]'
	touch $(STAMP)

# offline: the scripted model (agent/scripts/demo_max_reduction.json) plays coder and judge on the CPU device; the
# run goes where every command keeps results (KERNELWRIGHT_HOME, else ~/.local/share/kernelwright), and prints where
demo: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/kernelwright optimize Max_reduction_over_a_dimension --device cpu \
		--model scripted:demo_max_reduction.json --rounds 3

# the bundled transformer block (regions/examples) through optimize-model: profile, extract, one scripted region
# search (agent/scripts/demo_transformer_block.json), compose, verify end to end, all on the CPU; exit status 1
# (no region kept) is an outcome here, not a failure
demo-model: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/kernelwright optimize-model regions/examples/transformer_block.py \
		--device cpu --model scripted:demo_transformer_block.json --rounds 1 --only mlp.1 --no-compile-baseline || [ $$? -eq 1 ]

test: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q $(PYTEST_ARGS)

test-gpu: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q -m gpu $(PYTEST_ARGS)

# on a GPU machine: the GPU tests, kernelwright vs do_bench on every bundled CUDA pair (own size and large), the
# cached-evaluation seconds and a scripted optimize round trip, in one report (gpu-check.md in the home, which it
# prints; written section by section); GPU_CHECK_ARGS="--budget-s 540" skips what no longer fits. Without internet,
# install missing packages into the interpreter (pip install --no-deps WHEELS), never via PYTHONPATH: the harness's
# children get a clean environment (measured on an H100, 2026-11-25: every candidate crashed at start-up that way)
gpu-check: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

# builds and evaluations (bench_eval), sweep throughput with 1 vs 2 workers (bench_sweep), then the search
# (bench_search: autotune, greedy vs population on a simulated coder, screening vs full seconds), in one run
bench: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench_eval.py
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench_sweep.py
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench_search.py

# kernelwright's CPU speedups of the bundled pairs against a direct measurement in one process
bench-fidelity: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench_fidelity.py --device cpu

bench-hardening: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench_hardening.py

bench-sweep: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench_sweep.py

# every benchmark's smoke mode: that each runs to its report (seconds each; tests/benchmarks runs the same)
bench-smoke: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench_eval.py --smoke
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench_sweep.py --smoke
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench_fidelity.py --device cpu --smoke
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench_hardening.py --smoke
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/cuda_l1_static.py --smoke
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/gpu_check.py --device cpu --smoke
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench_search.py --smoke

clean:
	rm -rf $(VENV) runs/builds runs/scratch
