# Two entry points for a fresh Debian/Ubuntu machine: `make demo` and `make test`.
# Each installs whatever is missing (system packages included), then runs.

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := python3 python3-venv python3-dev postgresql postgresql-postgis chromium

.PHONY: demo test system venv lint bench clean

demo: venv
	$(VENV)/bin/pontual demo

test: venv
	$(VENV)/bin/pytest

lint: venv
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy runtime geo tracking stands engines db/tracking db/stands

bench: venv
	$(PY) bench/bench_matching.py && $(PY) bench/bench_stops.py && $(PY) bench/bench_copy.py

system:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "Instalando pacotes do sistema: $$missing"; \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; \
	fi

$(VENV)/.installed: pyproject.toml requirements.lock | system
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip uv
	$(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) -r requirements.lock
	$(VENV)/bin/uv pip install -q --python $(PY) --no-deps -e .
	touch $@

venv: system $(VENV)/.installed

clean:
	rm -rf $(VENV) out
