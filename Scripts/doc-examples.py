#!/usr/bin/env python3
"""Turns the ```swift blocks of README.md and docs/*.md into Swift files the test build compiles.

Usage: Scripts/doc-examples.py [--list]

`make test` runs it before `swift build --build-tests`. It writes one file per page that has
Swift blocks into Tests/DocExampleTests/Generated/ (git-ignored), compiled into the
`DocExampleTests` target against Arbor and ArborStore: an example that stops compiling fails the
build, and the error names the Markdown file and line (`#sourceLocation`). Nothing generated is
ever run; compiling is the test. `--list` prints every block and what became of it.

What a page becomes:
- Its blocks, in order, are the body of one function, `@MainActor func _docExample_<page>()
  async throws` (the context of a `main.swift`'s top level: `try` and `await` work, and the main
  actor is the one code reading `container.viewContext` runs on). The blocks share one scope, so
  a block may use what an earlier one declared.
- `import` lines at the start of a line are hoisted to the top of the file (deduplicated, after
  `import Foundation`, `import Arbor` and `import ArborStore`, which every file has).
- `DocFixture` (Tests/DocExampleTests/DocExampleTests.swift) is in scope: the Employee,
  Department and Timesheet classes and their model, which the fragments of most pages assume.

Markers, HTML comments a reader never sees, apply to the next ```swift block:
- `<!-- doc-test: new scope -->`: the block starts a new function (for a block that declares
  again a name an earlier block declared).
- `<!-- doc-test: file scope -->`: the block goes at the top level of the file, outside any
  function (extensions, protocols, and types other files use). Its names are the module's, so
  they must not collide with another page's.
- `<!-- doc-test: setup` ... `-->` (the lines between): hidden Swift put before the block in its
  function — the declarations a fragment needs (a context, an object, a request).

A fence tagged ```swift ignore is not compiled. It is for code that cannot compile here — Core
Data's Apple-only code, `Package.swift` snippets — and each page's count of them is listed in
`IGNORED` below, with the reason, so that an ignored block is never added in passing. Output
belongs in ```text (or another language), which is never compiled.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "Tests" / "DocExampleTests" / "Generated"

# Blocks tagged ```swift ignore, per page: how many, and why they cannot compile here.
IGNORED = {
    "README.md": (1, "a Package.swift snippet (PackageDescription is SwiftPM's, not a module tests link)"),
    "docs/getting-started.md": (1, "a Package.swift snippet"),
    "docs/debug-builds.md": (3, "Package.swift snippets (traits of a dependency)"),
    "docs/porting-from-core-data.md": (8, "Core Data code (import CoreData: Apple's platforms only)"),
}

ALWAYS_IMPORTED = ["Foundation", "Arbor", "ArborStore"]

FENCE = re.compile(r"^(\s*)```\s*([A-Za-z0-9_+-]*)\s*(.*?)\s*$")
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(new scope|file scope)\s*-->\s*$")
SETUP_START = re.compile(r"^\s*<!--\s*doc-test:\s*setup\s*$")
ANY_MARKER = re.compile(r"<!--\s*doc-test")
IMPORT = re.compile(r"^import\s+[A-Za-z_][A-Za-z0-9_.]*\s*$")


class Block:
    def __init__(self, line, lines, ignored, scope, setup):
        self.line = line          # the 1-based line of the block's first line of code
        self.lines = lines        # the code
        self.ignored = ignored    # tagged ```swift ignore
        self.scope = scope        # None, "new" or "file"
        self.setup = setup        # (1-based line of the first hidden line, lines) or None


def fail(page, line, message):
    sys.exit(f"{page}:{line}: doc-examples: {message}")


def blocks_of(page, text):
    """The ```swift blocks of a page, with the markers before them."""
    blocks = []
    lines = text.split("\n")
    scope, setup = None, None
    index = 0
    while index < len(lines):
        line = lines[index]
        if SETUP_START.match(line):
            start = index + 1
            end = start
            while end < len(lines) and "-->" not in lines[end]:
                end += 1
            if end == len(lines):
                fail(page, index + 1, "a setup marker without its closing -->")
            if lines[end].strip() != "-->":
                fail(page, end + 1, "put a setup marker's closing --> on a line of its own")
            if setup is not None:
                fail(page, index + 1, "two setup markers before one block")
            setup = (start + 1, lines[start:end])
            index = end + 1
            continue
        marker = MARKER.match(line)
        if marker:
            kind = "new" if marker.group(1) == "new scope" else "file"
            if scope is not None:
                fail(page, index + 1, "two scope markers before one block")
            scope = kind
            index += 1
            continue
        if ANY_MARKER.search(line):
            fail(page, index + 1, "a doc-test marker this script does not know: " + line.strip())
        fence = FENCE.match(line)
        if fence:
            indent, language, rest = fence.groups()
            end = index + 1
            while end < len(lines) and not re.match(r"^\s*```\s*$", lines[end]):
                end += 1
            if end == len(lines):
                fail(page, index + 1, "a code fence that is never closed")
            if language == "swift":
                code = [l[len(indent):] if l.startswith(indent) else l.lstrip() for l in lines[index + 1:end]]
                if rest not in ("", "ignore"):
                    fail(page, index + 1, f"unknown tag after ```swift: {rest!r} (only 'ignore')")
                blocks.append(Block(index + 2, code, rest == "ignore", scope, setup))
            elif scope is not None or setup is not None:
                fail(page, index + 1, "a doc-test marker before a block that is not ```swift")
            scope, setup = None, None
            index = end + 1
            continue
        index += 1
    if scope is not None or setup is not None:
        fail(page, len(lines), "a doc-test marker after the last block")
    return blocks


def identifier(page):
    """`docs/porting-from-core-data.md` → `porting_from_core_data`; `README.md` → `README`."""
    return re.sub(r"[^A-Za-z0-9]", "_", pathlib.Path(page).stem)


def fnv1a(data):
    """64-bit FNV-1a of bytes, as hex (DocExampleTests computes the same to find stale files)."""
    value = 0xcbf29ce484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def located(page, line, code):
    """Code preceded by a #sourceLocation naming its page and line, and followed by a reset.
    Lines are not indented, so that an error's column is the page's too."""
    out = [f'#sourceLocation(file: "{page}", line: {line})']
    out += code
    out.append("#sourceLocation()")
    return out


def generate(page, data):
    text = data.decode("utf-8")
    blocks = blocks_of(page, text)
    compiled = [b for b in blocks if not b.ignored]
    imports = list(ALWAYS_IMPORTED)

    def take_imports(code):
        # Hoisted imports leave an empty line, so the lines after them keep their numbers.
        kept = []
        for l in code:
            if IMPORT.match(l):
                module = l.split()[1]
                if module not in imports:
                    imports.append(module)
                kept.append("")
            else:
                kept.append(l)
        return kept

    file_scope = []
    functions = []          # lists of lines, one per function
    name = identifier(page)
    for block in compiled:
        code = take_imports(block.lines)
        setup = (block.setup[0], take_imports(block.setup[1])) if block.setup else None
        if block.scope == "file":
            if setup:
                file_scope += located(page, setup[0], setup[1])
            file_scope += located(page, block.line, code)
            continue
        if block.scope == "new" or not functions:
            functions.append([])
        if setup:
            functions[-1] += located(page, setup[0], setup[1])
        functions[-1] += located(page, block.line, code)

    out = [f"// Generated by Scripts/doc-examples.py from {page}: do not edit.",
           f"// source-fnv1a: {fnv1a(data)}",
           ""]
    out += [f"import {module}" for module in imports]
    out.append("")
    if file_scope:
        out += file_scope
        out.append("")
    for number, body in enumerate(functions, start=1):
        suffix = "" if number == 1 else f"_{number}"
        out.append("@MainActor")
        out.append(f"func _docExample_{name}{suffix}() async throws {{")
        out += body
        out.append("}")
        out.append("")
    return blocks, "\n".join(out)


def main():
    listing = "--list" in sys.argv[1:]
    pages = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
    OUTPUT.mkdir(parents=True, exist_ok=True)
    written = set()
    totals = [0, 0]
    for path in pages:
        page = path.relative_to(ROOT).as_posix()
        data = path.read_bytes()
        blocks, source = generate(page, data)
        ignored = [b for b in blocks if b.ignored]
        allowed = IGNORED.get(page, (0, ""))[0]
        if len(ignored) != allowed:
            fail(page, ignored[-1].line if ignored else 1,
                 f"{len(ignored)} ```swift ignore blocks, and IGNORED in {pathlib.Path(__file__).name} allows {allowed}: "
                 "make the block compile (with a setup marker if it is a fragment), or say in IGNORED why it cannot")
        totals[0] += len(blocks) - len(ignored)
        totals[1] += len(ignored)
        if listing:
            for b in blocks:
                print(f"{page}:{b.line}: {'ignored' if b.ignored else 'compiled'}"
                      f"{' (' + b.scope + ' scope)' if b.scope else ''}{' (with setup)' if b.setup else ''}")
        if len(blocks) == len(ignored):
            continue
        target = OUTPUT / f"{identifier(page)}.swift"
        written.add(target.name)
        if not target.exists() or target.read_text(encoding="utf-8") != source:
            target.write_text(source, encoding="utf-8")     # unchanged files keep their dates: no rebuild
    for stale in OUTPUT.glob("*.swift"):
        if stale.name not in written:
            stale.unlink()
    print(f"doc-examples: {totals[0]} Swift blocks compiled from {len(written)} pages, {totals[1]} ignored "
          f"(Tests/DocExampleTests/Generated/)")


if __name__ == "__main__":
    main()
