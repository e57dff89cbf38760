# The README's two commands: `make demo` (the main job) and `make test`.
# Both bootstrap what a fresh Debian 12 machine lacks (scripts/bootstrap.sh).
PY := .venv/bin/python

.PHONY: bootstrap demo test lint bench clean

bootstrap:
	@bash scripts/bootstrap.sh

demo: bootstrap
	$(PY) -m mininet_topos demo --out results/demo

test: bootstrap
	$(PY) -m pytest $(PYTEST_ARGS)

lint: bootstrap
	$(PY) -m ruff check .
	$(PY) -m mypy common controller ebpf traffic formats mininet_topos bench softswitch

bench: bootstrap
	$(PY) -m bench

clean:
	rm -rf .venv .pytest_cache build *.egg-info
