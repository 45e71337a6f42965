# Entry points for a fresh Debian/Ubuntu machine: `make demo`, `make console` and `make test`.
# Each installs whatever is missing (system packages included), then runs.
#
# Prerequisites (not installed by this file): make, git, and sudo for a user that is not root.
# On a fresh Debian, as root: apt-get install -y make git sudo && adduser USER sudo
# Installing system packages waits, up to 10 minutes, for another apt/dpkg process to finish
# (scripts/wait-apt-lock.sh).

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := python3 python3-venv python3-dev postgresql postgresql-postgis chromium
ROOMS := runtime geo fleet tracking stands enforcement maps planning db engines api
APT_GET := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600
NEXT_STEP := Para usar o comando pontual neste terminal: source $(VENV)/bin/activate  (ou chame $(VENV)/bin/pontual)

.PHONY: demo console test system venv lint bench clean

demo: venv
	$(VENV)/bin/pontual demo
	@echo "$(NEXT_STEP)"

# The demo, then the web console on it with one demo login per role (until Ctrl+C).
console: venv
	$(VENV)/bin/pontual demo --console

test: venv
	$(VENV)/bin/pytest

lint: venv
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy $(ROOMS)

bench: venv
	$(PY) bench/bench_matching.py && $(PY) bench/bench_stops.py && $(PY) bench/bench_copy.py

system:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		if [ -n "$(SUDO)" ] && ! command -v sudo >/dev/null; then \
			echo "erro: faltam pacotes do sistema ($$missing) e não há sudo; como root:" \
				"apt-get install -y sudo && adduser $$(id -un) sudo (ou instale os pacotes)" >&2; \
			exit 1; \
		fi; \
		echo "Instalando pacotes do sistema: $$missing"; \
		scripts/wait-apt-lock.sh && \
		$(APT_GET) update -q && \
		scripts/wait-apt-lock.sh && \
		$(APT_GET) install -y -q $$missing; \
	fi

$(VENV)/.installed: pyproject.toml requirements.lock | system
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip uv
	$(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) -r requirements.lock
	$(VENV)/bin/uv pip install -q --python $(PY) --no-deps -e .
	touch $@
	@echo "$(NEXT_STEP)"

# The project's own bytecode, compiled as pip compiles the dependencies': a process that may not
# write it (PYTHONDONTWRITEBYTECODE, a read-only tree) would compile every module at each start.
venv: system $(VENV)/.installed
	@$(PY) -m compileall -q $(ROOMS)

clean:
	rm -rf $(VENV) out
