# kernelwright: `make run` sets everything up and optimizes a bundled task offline; `make test` tests.
VENV   ?= .venv
PY     := $(VENV)/bin/python
KW     := $(VENV)/bin/kernelwright
STAMP  := $(VENV)/.installed
# With no NVIDIA GPU here, take the CPU build of torch first, so that nothing pulls a multi-GB CUDA build.
HAS_GPU := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
RUN_TASK ?= tasks/level1/09_softmax.py
# Each `make run` is a new run in a folder of its own, runs/<task>-<id> (printed with the result). RUN_OUT=DIR
# names the folder instead; one that holds another run is refused: continue that run with
# `kernelwright optimize --resume DIR`, or give another folder.
RUN_OUT  ?=

.PHONY: install run test test-all lint clean

install: $(STAMP)

# setuptools' editable install ends with a ten-line note that folders named like the package may shadow it:
# here kernelwright/ is that package on purpose (its __init__ loads the top-level folders), so that note is silenced;
# setuptools' other warnings still show.
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
ifeq ($(HAS_GPU),)
	$(PY) -m pip install -q torch==2.13.0
endif
	PYTHONWARNINGS='ignore:Editable installation' $(PY) -m pip install -q -e '.[dev]' 'triton==3.6.0' 'numpy<2.4'
	touch $(STAMP)

run: install
	KERNELWRIGHT_RUNS=runs $(KW) optimize $(RUN_TASK) --model offline --budget 6 --device auto $(if $(RUN_OUT),--out $(RUN_OUT))

# The default suite: unit, interpreter kernels and integration tests, slow ones excluded. Most tests wait
# on child processes (judges, servers), so two pytest workers (a test file each) halve the wall time.
# The suite starts about a hundred Python processes: where PYTHONDONTWRITEBYTECODE is set, it is lifted
# for the run, so each compiles kernelwright's modules (and pytest its rewritten tests) once, not each time.
# Each of those processes (test workers, judges, candidates) gets one intra-op thread: with torch's default
# (one per core) they oversubscribe the cores, and two files of kernel tests took 71 s instead of 60.
PYTEST_PAR ?= -n auto --maxprocesses=4 --dist loadfile
TEST_THREADS ?= 1
PYTEST     := env -u PYTHONDONTWRITEBYTECODE OMP_NUM_THREADS=$(TEST_THREADS) $(PY) -m pytest
test: install
	$(PYTEST) -m "not slow" -q $(PYTEST_PAR)

test-all: install
	$(PYTEST) -q $(PYTEST_PAR)

# mypy does not run import hooks, so it cannot see kernelwright.<folder> in the top-level folders
# (kernelwright/__init__.py loads them at run time): it reads a generated view, build/typecheck/kernelwright/,
# whose entries link to kernelwright/*.py and to each folder. Its errors name files under that view.
SUBPACKAGES  = $(shell $(PY) -c 'import kernelwright; print(*kernelwright.SUBPACKAGES)')
TYPECHECK   := build/typecheck
lint: install
	$(VENV)/bin/ruff check kernelwright setup.py $(SUBPACKAGES) tests benchmarks
	$(VENV)/bin/ruff format --check kernelwright setup.py $(SUBPACKAGES) tests benchmarks
	rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/kernelwright
	for f in kernelwright/*.py; do ln -s ../../../$$f $(TYPECHECK)/$$f; done
	for d in $(SUBPACKAGES); do ln -s ../../../$$d $(TYPECHECK)/kernelwright/$$d; done
	MYPYPATH=$(TYPECHECK) $(VENV)/bin/mypy -p kernelwright

clean:
	rm -rf $(VENV) runs build .pytest_cache .mypy_cache .ruff_cache
