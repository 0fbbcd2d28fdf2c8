#!/usr/bin/env python3
"""Splits a profile of EngineReport by workload and prints each workload's hottest functions.

EngineReport runs its workloads one after another in one process; every sample's call stack names
the workload it belongs to (`ArborEngine.pointReads(...)`, `SQLiteEngine.scan()`, ...). This script
reads the demangled text of `perf script`, assigns each sample to its workload, and prints per
workload: the share of samples in the kernel, the hottest functions by self samples, and by
inclusive samples (each function counted once per sample). Usage (docs/performance.md):

    cd Benchmarks && swift build -c release --product EngineReport
    perf record -F 2000 -e cpu-clock -g -o arbor.data .build/release/EngineReport 1000000 --arbor-only --rounds 1
    perf script -i arbor.data | swift demangle --simplified > arbor.txt
    python3 Scripts/perf-phases.py arbor.txt [top]

Stacks come from frame pointers (`-g`): Swift code keeps them, but liblz4 and parts of glibc do not,
so samples inside LZ4 (and some inside malloc) lose their callers and land under "other".
"""
import collections
import re
import sys

WORKLOADS = {"insertSequential", "pointReadTransactions", "pointReads", "scan", "insertTextKeys",
             "textKeyLookups", "updateOne", "insertTexts", "verifyTexts", "layout"}
FRAME = re.compile(r"^\s+[0-9a-f]+ (.*?)(\+0x[0-9a-f]+)? \((.*)\)$")
WORKLOAD = re.compile(r"(ArborEngine|SQLiteEngine)\.(\w+)\(")
# Frames that say where a sample is, not what it costs: left out of the inclusive list.
SCAFFOLDING = re.compile(r"run\(\)|EngineReport_main|__libc_start|protocol witness|closure #\d+ in "
                         r"(Arbor|SQLite)Engine|^(Arbor|SQLite)Engine\.|phase\(|^_start$|^main$|"
                         r"\[unknown\]|Database\.(read|write)|timedWrite|build #|measure #")


def read_samples(path):
    samples, stack = [], []
    for line in open(path, errors="replace"):
        if not line.strip():
            if stack:
                samples.append(stack)
            stack = []
            continue
        match = FRAME.match(line)
        if match:
            symbol, dso = match.group(1), match.group(3)
            if "kernel" in dso:
                symbol = "[kernel] " + symbol
            stack.append(re.sub(r"^(specialized |partial apply for |merged )+", "", symbol))
    if stack:
        samples.append(stack)
    return samples


def workload_of(stack):
    for frame in stack:
        match = WORKLOAD.search(frame)
        if match and match.group(2) in WORKLOADS:
            return match.group(1) + "." + match.group(2)
    return "other"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    samples = read_samples(sys.argv[1])
    groups = collections.defaultdict(list)
    for stack in samples:
        groups[workload_of(stack)].append(stack)
    print(f"{len(samples)} samples")
    for name, stacks in sorted(groups.items(), key=lambda item: -len(item[1])):
        n = len(stacks)
        print(f"\n== {name}: {n} samples ({100 * n / len(samples):.1f}% of all)")
        kernel = sum(1 for stack in stacks if stack[0].startswith("[kernel]"))
        print(f"   in the kernel (self): {100 * kernel / n:.1f}%")
        print("   self:")
        for symbol, count in collections.Counter(stack[0] for stack in stacks).most_common(top):
            print(f"   {100 * count / n:5.1f}%  {symbol[:150]}")
        inclusive = collections.Counter()
        for stack in stacks:
            inclusive.update(set(stack))
        print("   inclusive:")
        shown = 0
        for symbol, count in inclusive.most_common():
            if SCAFFOLDING.search(symbol):
                continue
            print(f"   {100 * count / n:5.1f}%  {symbol[:150]}")
            shown += 1
            if shown >= top:
                break


if __name__ == "__main__":
    main()
