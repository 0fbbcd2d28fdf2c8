# Arbor: build, test, demo, and the long campaigns.
#
#   make demo            build and run the demonstration (installs liblz4-dev first if missing)
#   make test            the whole test suite, as CI runs it (installs liblz4-dev first if missing)
#   make docs            the DocC archives of Arbor and ArborStore; fails on any DocC warning and on
#                        a public type missing from its catalogue's Topics (part of `make test`)
#   make crash-campaign  a long crash campaign (many more transactions than `make test`)
#   make model-campaign  a long model-based campaign (many more operations than `make test`)
#   make bench           benchmarks against SQLite (Benchmarks/, its own package)
#   make bench-engine    the engine workloads against SQLite at 1M rows (docs/performance.md)
#   make bench-graph     the object graph against GRDB records (docs/performance.md)
#   make bench-fetch     fetch requests against GRDB record requests (docs/performance.md)
#   make bench-floor     the floor under the fetch-of-all goal, against GRDB fetchAll (docs/performance.md)
#   make bench-contexts  saves/s from 1, 2 and 4 contexts at once against SQLite (docs/performance.md);
#                        CONTEXT_SAVES=N saves per measurement, CONTEXT_ROUNDS=N rounds
#   make bench-undo      100k property changes with and without an undo manager (docs/performance.md);
#                        UNDO_CHANGES=N changes, UNDO_OBJECTS=N objects, UNDO_ROUNDS=N rounds
#   make bench-results   one change in a 100,000-object fetched-results controller against refetching
#   make bench-generations  reads of a context pinned to a query generation against unpinned ones
#   make bench-relational  relational steps (key paths, aggregates, SUBQUERY, search, cascade) against GRDB
#   make bench-migration   schema migration (add a column; rewrite every row) against SQLite, 1M rows
#                        (docs/performance.md); RELATIONAL_SCALE=0.1 of 100k employees, RELATIONAL_ROUNDS=3,
#                        RELATIONAL_CACHES=default,128 (see Benchmarks/Sources/RelationalReport/main.swift)
#   make bench-tracker   an issue tracker's relational shapes against SQLite, 2,500 and 20,000 issues
#                        (TRACKER_ISSUES, TRACKER_ROUNDS, TRACKER_REPEATS)
#   make fuzz-smoke      a short libFuzzer run of every fuzz target (Fuzz/, its own package)
#   make tsan            the concurrency tests under Thread Sanitizer (.build-tsan)
#   make check-dependent a package depending on Arbor builds it without Arbor's checks, and with
#                        them when it names the `Checks` trait (Benchmarks/DependentImport; minutes)
#   make bench-debug     an import by a dependent package in its debug and release builds
#                        (Benchmarks/DependentImport; docs/debug-builds.md)
#
# Every build and test run of Arbor's own here turns on its `Checks` trait (Package.swift):
# queue checks and invariants in debug builds. `swift test` must be given the same `--traits`
# as the `swift build` before it, or it builds again.

SWIFT ?= swift
CHECKS := --traits Checks
CRASH_TRANSACTIONS ?= 400
MODEL_OPERATIONS ?= 2000000
CONTEXT_SAVES ?= 2000
CONTEXT_ROUNDS ?= 3
UNDO_CHANGES ?= 100000
UNDO_OBJECTS ?= 10000
UNDO_ROUNDS ?= 5
SHELL := /bin/bash
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export SWIFT_BACKTRACE ?= enable=no

FUZZ_TARGETS := FuzzPager FuzzPredicate FuzzPlanner
FUZZ_SECONDS ?= 60
FUZZ_BUILD := cd Fuzz && $(SWIFT) build -c release --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address

.PHONY: all deps build test docs tsan check-dependent bench-debug demo crash-campaign model-campaign bench bench-report bench-engine bench-graph bench-fetch bench-floor bench-contexts bench-undo bench-relational bench-results bench-generations bench-migration bench-tracker fuzz-build fuzz-replay fuzz-smoke clean

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
	$(SWIFT) build $(CHECKS)

test: deps
	@$(SWIFT) package dump-package | Scripts/check-default-traits.py
	@python3 Scripts/check-habits.py
	$(SWIFT) build --build-tests $(CHECKS)
	@set -o pipefail; $(SWIFT) test --skip-build $(CHECKS) 2>&1 | tee .build/test.log || Scripts/test-failures.sh .build/test.log
	@# The object-graph tests again over stores of row layout 2 (fixed-size columns first), the
	@# default before records (docs/row-format.md), which stores made then keep; tests of one
	@# layout's bytes name their layout.
	@ARBOR_NEW_ROW_LAYOUT=2 $(SWIFT) test --skip-build $(CHECKS) --filter ArborTests > .build/test-layout2.log 2>&1 || Scripts/test-failures.sh .build/test-layout2.log
	@tail -n 3 .build/test-layout2.log
	$(MAKE) fuzz-replay
	$(MAKE) docs
	@Scripts/test-summary.sh .build/test.log

# The DocC archives of the library modules, in .build/plugins/Swift-DocC/outputs/ (swift-docc-plugin).
# Any warning (a link that does not resolve, a parameter documented that does not exist) fails the
# build, and so does a public type, function or variable missing from the Topics of its module's
# catalogue (Sources/<Module>/<Module>.docc/<Module>.md): Scripts/check-docc-topics.py names it.
DOCC_TARGETS := ArborStore Arbor
DOCC_OUTPUTS := .build/plugins/Swift-DocC/outputs
docs: deps
	$(SWIFT) package generate-documentation $(addprefix --target ,$(DOCC_TARGETS)) --warnings-as-errors
	@Scripts/check-docc-topics.py $(foreach target,$(DOCC_TARGETS),$(DOCC_OUTPUTS)/$(target).doccarchive)

# The Swift blocks of README.md and docs/*.md, written into Tests/DocExampleTests/Generated/ for
# the test build to compile (an example that stops compiling fails `make test`; CONTRIBUTING.md).
.PHONY: doc-examples
doc-examples:
	python3 Scripts/doc-examples.py
test: doc-examples

# The tests of contexts used from several threads (and two processes), built with Thread
# Sanitizer in a build folder of their own: a data race fails the run. Scripts/tsan-suppressions.txt
# says which reports are known false positives, and why. Not part of `make test` (a second,
# instrumented build).
TSAN_TESTS ?= Registry|Concurrency|ConcurrentSaveStress|ParentContext|Notification|Container|Conflict|Undo|MultiStore|RowSnapshot|RemoteChange|QueryGeneration
tsan: deps
	$(SWIFT) build --build-tests $(CHECKS) --sanitize=thread --build-path .build-tsan
	set -o pipefail; TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/Scripts/tsan-suppressions.txt" $(SWIFT) test --skip-build $(CHECKS) --sanitize=thread --build-path .build-tsan --filter "$(TSAN_TESTS)" 2>&1 | tee .build-tsan/tsan.log

# A package depending on Arbor (Benchmarks/DependentImport, by path) builds it without Arbor's
# checks unless it names the `Checks` trait: its ChecksProbe uses a context off its queue, which
# must go unnoticed in its plain debug build and stop the program when it asks for the trait (its
# own `ArborChecks` trait passes `Checks` on). Two debug builds of Arbor, a few minutes each: not
# part of `make test`, which checks the manifest's defaults instead (Scripts/check-default-traits.py).
DEPENDENT := Benchmarks/DependentImport
check-dependent: deps
	cd $(DEPENDENT) && $(SWIFT) build --product ChecksProbe
	cd $(DEPENDENT) && "$$($(SWIFT) build --show-bin-path)/ChecksProbe"
	cd $(DEPENDENT) && $(SWIFT) build --product ChecksProbe --traits ArborChecks --build-path .build-checks
	@cd $(DEPENDENT) && if "$$($(SWIFT) build --traits ArborChecks --build-path .build-checks --show-bin-path)/ChecksProbe" 2> .build-checks/probe.log; then \
		echo "ChecksProbe went on with the ArborChecks trait: Arbor's checks are not on"; exit 1; fi; \
		grep -q "Arbor concurrency violation" .build-checks/probe.log && echo "with the Checks trait: $$(grep -o 'Arbor concurrency violation[^;]*' .build-checks/probe.log)"

# An import of 20,000 issues by a dependent package (Benchmarks/DependentImport) in its debug
# build, with and without Arbor's checks, with Arbor optimised (the `OptimizedInDebug` trait),
# and in its release build (docs/debug-builds.md); four builds of Arbor, minutes each;
# DEPENDENT_ISSUES=N issues, DEPENDENT_ROUNDS=N rounds.
DEPENDENT_ISSUES ?= 20000
DEPENDENT_ROUNDS ?= 5
bench-debug: deps
	cd $(DEPENDENT) && $(SWIFT) run DependentImport $(DEPENDENT_ISSUES) $(DEPENDENT_ROUNDS)
	cd $(DEPENDENT) && $(SWIFT) run --traits ArborChecks --build-path .build-checks DependentImport $(DEPENDENT_ISSUES) $(DEPENDENT_ROUNDS)
	cd $(DEPENDENT) && $(SWIFT) run --traits ArborOptimized --build-path .build-optimized DependentImport $(DEPENDENT_ISSUES) $(DEPENDENT_ROUNDS)
	cd $(DEPENDENT) && $(SWIFT) run -c release DependentImport $(DEPENDENT_ISSUES) $(DEPENDENT_ROUNDS)

demo: deps
	$(SWIFT) build -c release --product arbor
	@./Scripts/demo.sh "$$($(SWIFT) build -c release --show-bin-path)/arbor"

crash-campaign: deps
	set -o pipefail; ARBOR_CRASH_TRANSACTIONS=$(CRASH_TRANSACTIONS) $(SWIFT) test -c release --filter "CrashTests|TreeCrashTests" 2>&1 | tee .build/crash-campaign.log
	@grep -Eo '^crash images checked[^:]*: [0-9]+' .build/crash-campaign.log | grep -Eo '[0-9]+$$' | awk '{ s += $$1 } END { print "crash images checked in the campaign: " s }'

model-campaign: deps
	ARBOR_MODEL_OPERATIONS=$(MODEL_OPERATIONS) $(SWIFT) test -c release --filter DatabaseModelTests

deps-bench: deps
	@if [ ! -f /usr/include/sqlite3.h ]; then \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libsqlite3-dev >/dev/null; \
	fi

bench: deps-bench
	cd Benchmarks && $(SWIFT) package --allow-writing-to-package-directory benchmark

bench-report: deps-bench
	cd Benchmarks && $(SWIFT) run -c release CommitReport

bench-engine: deps-bench
	cd Benchmarks && $(SWIFT) run -c release EngineReport

bench-graph: deps-bench
	cd Benchmarks && $(SWIFT) run -c release ObjectGraphReport

bench-fetch: deps-bench
	cd Benchmarks && $(SWIFT) run -c release FetchReport

bench-floor: deps-bench
	cd Benchmarks && $(SWIFT) run -c release FetchFloor

bench-contexts: deps-bench
	cd Benchmarks && $(SWIFT) run -c release ContextSaveReport $(CONTEXT_SAVES) $(CONTEXT_ROUNDS)

bench-undo: deps-bench
	cd Benchmarks && $(SWIFT) run -c release UndoReport $(UNDO_CHANGES) $(UNDO_OBJECTS) $(UNDO_ROUNDS)

bench-relational: deps-bench
	cd Benchmarks && $(SWIFT) run -c release RelationalReport

bench-results: deps-bench
	cd Benchmarks && $(SWIFT) run -c release ResultsControllerReport

bench-generations: deps-bench
	cd Benchmarks && $(SWIFT) run -c release QueryGenerationReport

bench-migration: deps-bench
	cd Benchmarks && $(SWIFT) run -c release MigrationReport

bench-tracker: deps-bench
	cd Benchmarks && $(SWIFT) run -c release TrackerReport

# Fuzz targets are release builds with libFuzzer and AddressSanitizer (debug builds give the
# fuzzer no guidance); the backtracer is off because it hangs under ASan. The cached build plan
# is dropped first: SwiftPM does not notice source files added to the root package it depends on.
fuzz-build: deps
	@rm -f Fuzz/.build/release.yaml
	@for target in $(FUZZ_TARGETS); do ($(FUZZ_BUILD) --product $$target) || exit 1; done

# Replays the committed corpus once (part of `make test`).
fuzz-replay: fuzz-build
	@for target in $(FUZZ_TARGETS); do \
		bin="$$(cd Fuzz && $(SWIFT) build -c release --show-bin-path)/$$target"; \
		"$$bin" -runs=0 Fuzz/Corpus/$$target 2>&1 | grep -E "INFO: Loaded|Done|ERROR|SUMMARY" ; \
		test $${PIPESTATUS[0]} -eq 0 || exit 1; \
	done

# A short fuzzing run per target on a scratch copy of the corpus (new inputs are not committed).
fuzz-smoke: fuzz-build
	@for target in $(FUZZ_TARGETS); do \
		bin="$$(cd Fuzz && $(SWIFT) build -c release --show-bin-path)/$$target"; \
		work="$$(mktemp -d)"; cp Fuzz/Corpus/$$target/* "$$work/"; \
		mkdir -p Fuzz/artifacts; \
		"$$bin" "$$work" -max_total_time=$(FUZZ_SECONDS) -max_len=20000 -artifact_prefix=Fuzz/artifacts/ 2>&1 | tail -3; \
		status=$${PIPESTATUS[0]}; rm -rf "$$work"; test $$status -eq 0 || exit 1; \
	done

clean:
	rm -rf .build Benchmarks/.build Fuzz/.build $(DEPENDENT)/.build $(DEPENDENT)/.build-checks $(DEPENDENT)/.build-optimized
