#!/usr/bin/env python3
"""Fails when Package.swift turns on a trait by default.

A package depending on Arbor gets its default traits unless it says otherwise, and Arbor's
`Checks` trait (queue checks and invariants in debug builds) must stay off for it unless it asks
(docs/debug-builds.md). Reads `swift package dump-package` from standard input; `make test` runs it.
"""
import json
import sys

manifest = json.load(sys.stdin)
traits = manifest.get("traits", [])
defaults = [name for trait in traits if trait["name"] == "default" for name in trait.get("enabledTraits", [])]
if defaults:
    print(f"Package.swift turns on traits by default: {', '.join(defaults)}; dependents would build with them", file=sys.stderr)
    sys.exit(1)
print(f"traits: {', '.join(t['name'] for t in traits) or 'none'}; none on by default")
