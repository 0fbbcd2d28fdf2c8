#!/usr/bin/env bash
# Prints what failed in a swift test log: the tests that recorded an issue, with the issue, and
# any fatal error (a crash ends the run without a test's report). `make test` calls it when a run
# fails, so that the end of the output (all a CI summary may keep) names the failure.
log="$1"
echo "---- failures in $log ----"
grep -E 'recorded an issue|Fatal error|Caught error|[Ss]ignal [0-9]+|signal code [0-9]+|Program crashed|✘ Test run' "$log" | grep -v '^r[0-9a-z]* *0x' | head -n 60
echo "---- (the whole log: $log) ----"
exit 1
