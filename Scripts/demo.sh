#!/usr/bin/env bash
# The demonstration `make demo` runs: first the object graph (`arbor demo`: the seeds'
# Employee/Department example on a store file, which `arbor info` and `arbor check` then inspect);
# then the engine: several processes share one database file through its locks and journal, a
# writer is killed mid-run with SIGKILL, and the file is recovered and checked.
# Argument: the path of the built `arbor` binary.
set -euo pipefail
arbor="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
db="$dir/demo.arbor"

echo "== The object graph: arbor demo"
"$arbor" demo "$dir/employees.arbor"
echo
"$arbor" info "$dir/employees.arbor"
"$arbor" check "$dir/employees.arbor"
echo
echo "== The model the store keeps: arbor model"
"$arbor" model "$dir/employees.arbor"
echo
echo "== Query the store with the model it keeps: arbor query"
"$arbor" query "$dir/employees.arbor" Employee --where "salary >= 100000" --sort lastName:desc
"$arbor" query "$dir/employees.arbor" Employee --where "salary > %@ AND department == %@" --arg 100000 --arg Department/1 --format csv
"$arbor" query "$dir/employees.arbor" Employee --where "lastName BEGINSWITH[cd] 'h'" --explain
echo

echo "== Two writer processes and a reader share $db"
"$arbor" stress "$db" --writer 0 --count 200 &
w0=$!
"$arbor" stress "$db" --writer 1 --count 200 &
w1=$!
"$arbor" stress "$db" --count 200
wait "$w0" "$w1"
"$arbor" stress "$db" --verify --writers 2 --count 200

echo
echo "== A third writer is killed with SIGKILL while committing"
"$arbor" stress "$db" --writer 2 --count 100000 >/dev/null 2>&1 &
victim=$!
sleep 0.5
kill -9 "$victim"
wait "$victim" 2>/dev/null || true
if [ -f "$db-journal" ]; then
  echo "   the journal it left behind: $(stat -c %s "$db-journal") bytes"
fi

echo
echo "== arbor recover rolls back what the killed writer left (read-only commands ask for it)"
"$arbor" recover "$db"
echo
echo "== Every read transaction is consistent"
"$arbor" stress "$db" --count 20
echo
"$arbor" info "$db"
