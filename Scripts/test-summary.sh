#!/usr/bin/env bash
# Prints the closing line of `make test` from the swift test log: "tests: N passed, 0 failed"
# (the run already failed, with its own report, if any test failed), and the crash-image total.
set -euo pipefail
log="$1"
passed=$(grep -Eo 'Test run with [0-9]+ tests? in [0-9]+ suites? passed' "$log" | grep -Eo '[0-9]+' | head -1 || true)
images=$(grep -Eo '^crash images checked[^:]*: [0-9]+' "$log" | grep -Eo '[0-9]+$' | awk '{ s += $1 } END { print s + 0 }')
echo "crash images checked: ${images:-0}"
echo "tests: ${passed:-0} passed, 0 failed"
