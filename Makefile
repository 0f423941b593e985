PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo install gnugo bench clean clean-cache

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# GNU Go is the rules oracle and reference opponent. Installed when we are
# root; otherwise its tests report themselves skipped with the reason.
gnugo:
	@if command -v gnugo >/dev/null 2>&1 || test -x /usr/games/gnugo; then :; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
		(apt-get update -qq && apt-get install -y -qq gnugo) >/dev/null 2>&1 || echo "could not install gnugo; its tests will be skipped"; \
	else echo "gnugo not installed and not root: GNU Go tests will be skipped"; fi

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

test: $(STAMP) gnugo sabaki-gtp
	$(BIN)/python -m pytest -q tests

demo: $(STAMP)
	$(BIN)/python -m alphalite.demo

bench: $(STAMP)
	for b in benchmarks/*.py; do $(BIN)/python $$b; done

# Compiled Numba kernels and bytecode (alphalite/numba_cache.py already
# rebuilds kernels whose sources changed).
clean-cache:
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -print | xargs rm -rf

clean: clean-cache
	rm -rf $(VENV) runs build *.egg-info
