# Arbor: build, test, demo, and the long campaigns.
#
#   make demo            build and run the demonstration (installs liblz4-dev first if missing)
#   make test            the whole test suite, as CI runs it (installs liblz4-dev first if missing)
#   make crash-campaign  a long crash campaign (many more transactions than `make test`)
#   make bench           benchmarks against SQLite (Benchmarks/, its own package)

SWIFT ?= swift
CRASH_TRANSACTIONS ?= 400
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export SWIFT_BACKTRACE ?= enable=no

.PHONY: all deps build test demo crash-campaign bench bench-report clean

all: build

# Installs the system libraries the package needs when their headers are missing
# (non-interactively; as root directly, otherwise through sudo).
deps:
	@if [ ! -f /usr/include/lz4.h ]; then \
		echo "Installing liblz4-dev (LZ4 compression for large values)…"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq liblz4-dev >/dev/null; \
	fi

build: deps
	$(SWIFT) build

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

demo: deps
	$(SWIFT) build -c release --product arbor
	@./Scripts/demo.sh "$$($(SWIFT) build -c release --show-bin-path)/arbor"

crash-campaign: deps
	ARBOR_CRASH_TRANSACTIONS=$(CRASH_TRANSACTIONS) $(SWIFT) test -c release --filter CrashTests

deps-bench: deps
	@if [ ! -f /usr/include/sqlite3.h ]; then \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libsqlite3-dev >/dev/null; \
	fi

bench: deps-bench
	cd Benchmarks && $(SWIFT) package --allow-writing-to-package-directory benchmark

bench-report: deps-bench
	cd Benchmarks && $(SWIFT) run -c release CommitReport

clean:
	rm -rf .build Benchmarks/.build Fuzz/.build
