#!/usr/bin/env python3
"""Fails on the habits reviews keep catching, one line per finding (`path:line: what is wrong`).

`make test` runs it from the repository root (CONTRIBUTING.md, "Checks that run with make test").
Eight checks:

1. long functions: a function, initialiser, subscript or computed property in Sources/ longer
   than 60 lines (its declaration line to its closing brace) without a comment saying why — a
   `// Long: <reason>` line (or a `/// Long: <reason>` doc line) within the 3 lines above its
   declaration, or a `// Long: <reason>` line as the first line of its body;
2. the metadata tree and its keys: the literal "arbor.metadata", or a key spelt out
   (`metadata.get(Array("…".utf8))`, `put`, `delete`), in Sources/ outside their owner,
   NativeStore+Metadata.swift (its `MetadataKey` lists every key);
3. key paths split by hand: `split(separator: ".")` in Sources/Arbor outside the key path's
   owner, `KeyPathEvaluator.keys(of:)`;
4. a managed object's internal fields written from Sources/Arbor/Context/ (outside the object's
   own methods);
5. unsafe constructs (`Unmanaged`, unsafe pointers, `unowned(unsafe)`, `@exclusivity(unchecked)`,
   …) outside the files listed below, each of which states its safety argument once, on a line
   starting `// Safety:`;
6. a doc reference (`docs/X.md, "Section"`, `[X.md](X.md), "Section"`) naming a heading, or a
   bold run-in label (`**Section.**` opening a paragraph or a list item), that the file does not
   have;
7. key paths walked over the model by hand: a `for` loop in Sources/Arbor that looks properties
   up by name (`relationshipsByName[…]`, `attributesByName[…]`) and steps a variable along
   (`current = next`) outside the walker's owner, `ModelKeyPath`;
8. the native store's insides reached from outside its folder: a downcast to `NativeStore`
   (`as? NativeStore`, `as! NativeStore`, `is NativeStore`) or a read of a store's engine
   `database`, in Sources/Arbor outside Sources/Arbor/NativeStore/ (the coordinator asks a store
   for a capability instead).

Checks 2 to 5, 7 and 8 hold today's uses in allow-lists below, by file and count: a new file or a higher
count fails; a lower count is noted (lower the number in the same commit). `--report` prints
what every check counted, file by file. Python 3 only, no dependencies; well under a second.

The Swift sources are lexed once (comments, string literals — multi-line and raw ones, with
their interpolations — told from code), so braces, keys and constructs are found in code only.
"""
import bisect
import glob
import os
import re
import sys

# --- Allow-lists ------------------------------------------------------------------------------

# Check 1: functions over 60 lines with no `// Long:` comment, by "path: declaration name".
LONG_FUNCTIONS: dict = {}

# Check 2: files other than the owner naming the metadata tree, with their count of uses.
METADATA_OWNER = "Sources/Arbor/NativeStore/NativeStore+Metadata.swift"
METADATA_USERS: dict = {}

# Check 3: files splitting key paths at dots themselves, with their count.
KEY_PATH_OWNER = "Sources/Arbor/Objects/KeyPathEvaluator.swift"
KEY_PATH_SPLITS: dict = {}

# Check 7: `for` loops stepping over the model by property names, by file and count (with why).
MODEL_WALK_OWNER = "Sources/Arbor/Model/ModelKeyPath.swift"
MODEL_WALKS = {
    "Sources/Arbor/Context/ManagedObjectContext+Fetch.swift":
        (1, "prefetch(_:of:) walks objects level by level, each object's own entity naming the next key"),
    "Sources/Arbor/Objects/ManagedObject+KeyValueCoding.swift":
        (1, "setValue(_:forKeyPath:) walks objects, not descriptions: each object's own entity (a "
            "sub-entity's, perhaps) names the next key, so the path cannot be resolved once"),
}

# Check 8: files outside Sources/Arbor/NativeStore/ that downcast to NativeStore or read a store's
# engine database, with their count.
NATIVE_STORE_FOLDER = "Sources/Arbor/NativeStore/"
NATIVE_INSIDES: dict = {}

# Check 4: writes of a managed object's internal fields from Context/, by file. The object's
# state transitions are its own methods (Objects/ManagedObject+Transitions.swift); what is left is
# bookkeeping the context's own structures keep on the object, each with why.
OBJECT_FIELD_WRITES = {
    "Sources/Arbor/Context/ManagedObjectContext+Faults.swift":
        (3, "heldByContext: the ring of destinations the context holds (holdDestination) marks its members"),
    "Sources/Arbor/Context/ObjectRegistry.swift":
        (5, "changeSlot, the object's place in a ChangeList, and the registry's link: the list's and the "
            "registry's own bookkeeping, kept on the object so that membership costs no lookup"),
}

# Check 5: files that may use unsafe constructs, with their count of lines using them when
# their `// Safety:` argument was last read against them. A file's count going up means a new
# use: read the file's argument again, extend it if it does not cover the use, and raise the
# number.
UNSAFE_FILES = {
    # The object graph: unretained model objects, interned ID spaces, lent row bytes, queue-confined state.
    "Sources/Arbor/Context/LockedInbox.swift": 1,
    "Sources/Arbor/Context/ManagedObjectContext+BatchInsert.swift": 1,
    "Sources/Arbor/Context/ManagedObjectContext+Concurrency.swift": 4,
    "Sources/Arbor/Context/ManagedObjectContext+Fetch.swift": 12,
    "Sources/Arbor/Context/ManagedObjectContext+Values.swift": 20,
    "Sources/Arbor/Context/ManagedObjectContext.swift": 9,
    "Sources/Arbor/Context/ObjectRegistry.swift": 2,
    "Sources/Arbor/Coordinator/PersistentStoreCoordinator.swift": 5,
    "Sources/Arbor/Fetch/PredicateEvaluator+Expressions.swift": 1,
    "Sources/Arbor/Model/EntityDescription.swift": 4,
    "Sources/Arbor/NativeStore/MigrationLoss.swift": 1,
    "Sources/Arbor/NativeStore/NativeStore+Aggregates.swift": 8,
    "Sources/Arbor/NativeStore/NativeStore+Fetch.swift": 6,
    "Sources/Arbor/NativeStore/NativeStore+Migration.swift": 2,
    "Sources/Arbor/NativeStore/NativeStore+Schema.swift": 1,
    "Sources/Arbor/NativeStore/NativeStore.swift": 4,
    "Sources/Arbor/NativeStore/RawRow.swift": 1,
    "Sources/Arbor/NativeStore/RowFormat+Records.swift": 15,
    "Sources/Arbor/NativeStore/RowRun.swift": 19,
    "Sources/Arbor/NativeStore/RowFormat.swift": 20,
    "Sources/Arbor/NativeStore/RowWriter.swift": 16,
    "Sources/Arbor/NativeStore/ScanFilter+Folding.swift": 11,
    "Sources/Arbor/NativeStore/ScanFilter+Records.swift": 9,
    "Sources/Arbor/NativeStore/ScanFilter.swift": 30,
    "Sources/Arbor/NativeStore/StoreMigration.swift": 1,
    "Sources/Arbor/NativeStore/UnicodeLowercase.swift": 1,
    "Sources/Arbor/Objects/ManagedObject+KeyValueCoding.swift": 5,
    "Sources/Arbor/Objects/ManagedObject+Observation.swift": 1,
    "Sources/Arbor/Objects/ManagedObject.swift": 16,
    "Sources/Arbor/Objects/ManagedObjectID.swift": 3,
    "Sources/Arbor/Objects/ObjectIDTable.swift": 14,
    "Sources/Arbor/Objects/PropertyStorage.swift": 7,
    "Sources/Arbor/Support/LeanWeakReference.swift": 3,
    # The engine: pages and keys lent by closures, buffers it owns, connection-confined state.
    "Sources/ArborStore/BTree/BTree+Insert.swift": 3,
    "Sources/ArborStore/BTree/BTree+Lookups.swift": 5,
    "Sources/ArborStore/BTree/BTree.swift": 6,
    "Sources/ArborStore/BTree/BTreeCursor.swift": 6,
    "Sources/ArborStore/BTree/LeafCell.swift": 4,
    "Sources/ArborStore/BTree/NodeImage.swift": 8,
    "Sources/ArborStore/BTree/NodeLayout.swift": 38,
    "Sources/ArborStore/BTree/PageValidation.swift": 3,
    "Sources/ArborStore/Database/Database+Maintenance.swift": 5,
    "Sources/ArborStore/Database/Database.swift": 3,
    "Sources/ArborStore/Database/Transaction.swift": 6,
    "Sources/ArborStore/Database/Tree.swift": 12,
    "Sources/ArborStore/Database/ValuePrefilter.swift": 9,
    "Sources/ArborStore/Encoding/KeyEncoding.swift": 16,
    "Sources/ArborStore/Encoding/KeyReader.swift": 12,
    "Sources/ArborStore/Encoding/RecordEncoding.swift": 3,
    "Sources/ArborStore/FileSystem/FileSystem.swift": 6,
    "Sources/ArborStore/FileSystem/MemoryFileSystem.swift": 4,
    "Sources/ArborStore/FileSystem/PosixFileSystem.swift": 4,
    "Sources/ArborStore/Pager/DatabaseHeader.swift": 8,
    "Sources/ArborStore/Pager/Journal.swift": 7,
    "Sources/ArborStore/Pager/PageCache.swift": 24,
    "Sources/ArborStore/Pager/Pager+Commit.swift": 3,
    "Sources/ArborStore/Pager/Pager+Pages.swift": 7,
    "Sources/ArborStore/Pager/Pager+Replace.swift": 5,
    "Sources/ArborStore/Pager/Pager.swift": 21,
    "Sources/ArborStore/Support/LZ4.swift": 8,
    "Sources/ArborStore/Support/LittleEndian.swift": 2,
    "Sources/ArborStore/Support/XXH64.swift": 1,
    # Test support: the simulated disk copies lent buffers.
    "Sources/ArborTestSupport/SimulatedDisk.swift": 5,
}

# Check 6: broken references left alone for now, by (citing file, target file, section).
DOC_REFERENCES: dict = {}

# --- The Swift sources, lexed once ------------------------------------------------------------

ROOT = "Sources"
SWIFT = sorted(p for p in glob.glob(f"{ROOT}/**/*.swift", recursive=True))

_CODE = re.compile(r'//|/\*|(#*)("""|")|[()]')
_BLOCK = re.compile(r"/\*|\*/")
_STRING = {}


def _string_pattern(hashes, multiline):
    key = (hashes, multiline)
    if key not in _STRING:
        h = "#" * hashes
        close = re.escape(('"""' if multiline else '"') + h)
        alternatives = [r"\\" + h + r"\(", r"\\" + h + r".", close] + ([] if multiline else [r"\n"])
        _STRING[key] = re.compile("|".join(f"({a})" for a in alternatives), re.S)
    return _STRING[key]


def _skip_block_comment(text, pos):
    depth = 1
    while depth:
        m = _BLOCK.search(text, pos)
        if not m:
            return len(text)
        depth += 1 if m.group(0) == "/*" else -1
        pos = m.end()
    return pos


def _skip_string(text, pos, hashes, multiline):
    pattern = _string_pattern(hashes, multiline)
    while True:
        m = pattern.search(text, pos)
        if not m:
            return len(text)
        if m.group(1):
            pos = _skip_code(text, m.end(), interpolation=True)
        elif m.group(2):
            pos = m.end()
        else:
            return m.end() if m.group(3) else m.start()


def _skip_code(text, pos, interpolation=False, spans=None):
    """Skips code from `pos` to the `)` closing an interpolation (or the end), recording the
    comments and string literals met at the top level in `spans`."""
    depth = 0
    while True:
        m = _CODE.search(text, pos)
        if not m:
            return len(text)
        token = m.group(0)
        if token == "//":
            end = text.find("\n", m.start())
            end = len(text) if end < 0 else end
            kind = "c"
        elif token == "/*":
            end = _skip_block_comment(text, m.end())
            kind = "c"
        elif token == "(":
            depth += 1
            pos = m.end()
            continue
        elif token == ")":
            if interpolation and depth == 0:
                return m.end()
            depth -= 1
            pos = m.end()
            continue
        else:
            end = _skip_string(text, m.end(), len(m.group(1)), m.group(2) == '"""')
            kind = "s"
        if spans is not None:
            spans.append((m.start(), end, kind))
        pos = end


def _blank(text, spans, kinds):
    out, last = [], 0
    for start, end, kind in spans:
        if kind in kinds:
            out.append(text[last:start])
            out.append("\n".join(" " * len(part) for part in text[start:end].split("\n")))
            last = end
    out.append(text[last:])
    return "".join(out)


class Source:
    """A Swift file: its lines, its code with comments and strings blanked (`code`), and with
    only comments blanked (`literal`), line for line."""

    def __init__(self, path):
        self.path = path
        self.text = open(path, encoding="utf-8").read()
        spans = []
        _skip_code(self.text, 0, spans=spans)
        self.code = _blank(self.text, spans, "cs")
        self.literal = _blank(self.text, spans, "c")
        self.lines = self.text.split("\n")
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]

    def line_of(self, offset):
        return bisect.bisect_right(self.line_starts, offset)

    def matches(self, pattern, text, needles):
        """The line numbers of the matches of `pattern` in `text` (one per match), on the lines
        holding one of `needles` (a cheap filter first)."""
        lines = []
        for number, line in enumerate(text.split("\n"), 1):
            if any(needle in line for needle in needles):
                lines += [number] * len(pattern.findall(line))
        return lines


SOURCES = {path: Source(path) for path in SWIFT}
findings = []
notes = []
report = {}
# The check running, and how many findings each check made (for the summary).
CHECKS = ["long functions", "metadata key", "key path splits", "object fields", "unsafe constructs", "doc references",
          "model walks", "store insides"]
per_check = dict.fromkeys(CHECKS, 0)
running = [CHECKS[0]]


def finding(path, line, message):
    findings.append(f"{path}:{line}: {message}")
    per_check[running[0]] += 1


# --- 1. Long functions ------------------------------------------------------------------------

LIMIT = 60
_MODIFIERS = (r"(?:prefix|postfix|infix|public|private|fileprivate|internal|open|package|static|class|final|"
              r"override|lazy|weak|unowned|nonisolated|mutating|nonmutating|dynamic|required|"
              r"convenience|indirect|optional|consuming|borrowing|__consuming|distributed)")
DECLARATION = re.compile(r"^[ \t]*(?:@[\w.]+(?:\([^)\n]*\))?[ \t]+)*(?:" + _MODIFIERS + r"(?:\([^)\n]*\))?[ \t]+)*"
                         r"(func|init|deinit|subscript|var)(?!\w)", re.M)
FUNCTION_NAME = re.compile(r"\s*(?:[\w`]+|[-+*/%<>=!&|^~?.]*)")
# What ends a signature's scan: a brace, a bracket, `;`, `=`, a line break, or (at depth 0) the
# next declaration — a keyword, or an attribute or `#if` opening a line.
SIGNATURE_STOP = re.compile(r"\n[ \t]*[@#]\w|[{}()\[\];=\n]|\b(?:func|var|let|init|subscript|case|struct|class|enum|"
                            r"extension|protocol|typealias|associatedtype|deinit)\b")
# The keyword, the name and the first argument label of a declaration: `func plan(metadata:`.
DECLARATION_NAME = re.compile(r"(?:.*?\b)?((?:func|init|deinit|subscript|var)\b[^(:{<]*)(?:<[^>]*>)?(\([^:)]*:?)?")
LONG_MARK = re.compile(r"^\s*///?\s*Long:\s*\S")


def bodies(source):
    """(first line, last line, line of the opening brace, name) of every function, initialiser,
    subscript and computed or observed property with a body."""
    code = source.code
    stack, closing = [], {}
    for m in re.finditer(r"[{}]", code):
        if m.group(0) == "{":
            stack.append(m.start())
        else:
            closing[stack.pop()] = m.start()
    for m in DECLARATION.finditer(code):
        keyword = m.group(1)
        pos = m.end()
        if keyword == "func":
            pos = FUNCTION_NAME.match(code, pos).end()
        depth, brace = 0, None
        while True:
            stop = SIGNATURE_STOP.search(code, pos)
            if not stop:
                break
            token, pos = stop.group(0), stop.end()
            if token in "([":
                depth += 1
            elif token in ")]":
                depth -= 1
            elif depth > 0 or (token == "=" and keyword != "var") or (token == "\n" and keyword != "var"):
                continue  # inside parameters or brackets; a `where` clause's `==`; a signature's next line
            elif token == "{":
                brace = stop.start()
                break
            else:
                break  # a stored property, a requirement without a body, or the next declaration
        if brace is None or brace not in closing:
            continue
        name = re.sub(r"\s+", " ", code[m.start(): brace]).strip()
        name = "".join(DECLARATION_NAME.match(name).groups("")).strip()
        if name.endswith(":"):
            name += "…)"
        elif name.endswith("("):
            name += ")"
        yield source.line_of(m.start()), source.line_of(closing[brace]), source.line_of(brace), name


def explained(source, first, brace_line):
    lines = source.lines
    above = lines[max(0, first - 4): first - 1]
    if any(LONG_MARK.match(line) for line in above):
        return True
    opening = lines[brace_line - 1]
    if re.search(r"\{\s*//\s*Long:\s*\S", opening):
        return True
    return brace_line < len(lines) and re.match(r"^\s*//\s*Long:\s*\S", lines[brace_line]) is not None


def check_long_functions():
    counts = {}
    allowed_seen = set()
    for path, source in SOURCES.items():
        module = "/".join(path.split("/")[:2])
        for first, last, brace_line, name in bodies(source):
            length = last - first + 1
            if length <= LIMIT:
                continue
            tally = counts.setdefault(module, [0, 0, 0, 0])
            tally[0] += 1
            if length > 100:
                tally[3] += 1
            key = f"{path}: {name}"
            if explained(source, first, brace_line):
                tally[1] += 1
            elif key in LONG_FUNCTIONS:
                tally[2] += 1
                allowed_seen.add(key)
            else:
                finding(path, first, f"`{name}` is {length} lines (over {LIMIT}) and no `// Long: <reason>` "
                                     "comment says why it reads best as one function")
    for key in sorted(set(LONG_FUNCTIONS) - allowed_seen):
        notes.append(f"note: LONG_FUNCTIONS lists `{key}`, which is no longer an unexplained long function: remove it")
    report["long functions"] = {
        module: f"{n} over {LIMIT} lines, {over_100} over 100 ({explained_n} with `// Long:`, {allowed} allow-listed)"
        for module, (n, explained_n, allowed, over_100) in sorted(counts.items())}
    report["long functions"]["total"] = sum(n for n, _, _, _ in counts.values())


# --- 2 to 4. Counted uses against allow-lists -------------------------------------------------

def check_counted(title, pattern, needles, paths, allowed, owner, what, text="literal"):
    """Counts the matches of `pattern` per file of `paths` but `owner` (on lines holding one of
    `needles`, in the source's `text`), against `allowed` (path: count, or (count, reason))."""
    uses = {}
    for path in paths:
        if path == owner:
            continue
        source = SOURCES[path]
        lines = source.matches(pattern, getattr(source, text), needles)
        if lines:
            uses[path] = lines
    judge_uses(uses, allowed, title, what)


def judge_uses(uses, allowed, title, what):
    """Holds `uses` (path: lines) against `allowed` (path: count, or (count, reason)): findings
    for a new file or a higher count, notes for a lower one; the counts go to the report."""
    for path, lines in sorted(uses.items()):
        entry = allowed.get(path, 0)
        limit = entry[0] if isinstance(entry, tuple) else entry
        if len(lines) > limit:
            if path not in allowed:
                for line in lines:
                    finding(path, line, f"{what} (a file not in the allow-list)")
            else:
                finding(path, lines[0], f"{what} ({len(lines)} in this file, the allow-list has {limit}; the first is here)")
        elif len(lines) < limit:
            notes.append(f"note: {path} has {len(lines)} {title}, the allow-list {limit}: lower it")
    for path in sorted(set(allowed) - set(uses)):
        notes.append(f"note: {path} has no {title} any more: remove it from the allow-list")
    report[running[0]] = {path: len(lines) for path, lines in sorted(uses.items())}
    report[running[0]]["total"] = sum(len(lines) for lines in uses.values())


METADATA_KEY = re.compile(r'"arbor\.metadata"|\bmetadata\w*\.(?:get|put|delete)\(\s*Array\("')
NATIVE_INSIDE = re.compile(r"\b(?:as[?!]\s*|is\s+)NativeStore\b|\.database\b")
KEY_PATH_SPLIT = re.compile(r'\bsplit\(separator:\s*"\."\s*(?:\)|,\s*omittingEmptySubsequences:\s*false\s*\))')
OBJECT_FIELDS = ("link|values|committed|faulted|insertedFlag|deletedFlag|eventMarks|heldByContext|rowMissing|"
                 "changeSlot|announcedInSave|changedSlots|unloadedRelationships|committedVersion|filledGeneration|"
                 "objectID|managedObjectContext|observationRegistrar|prefetchedDestinations|faultBatch|"
                 "refusedValues|lastAccessFailure")
# The names Context/ gives managed objects (`for object in …`, `let fault = …`, `$0`).
OBJECT_RECEIVERS = (r"(?:\b(?:object|obj|o|fault|destination|owner|target|source|inserted|deleted)|\$0"
                    r"|\bheldDestinations\[[^\]\n]*\])[!?]?")
OBJECT_FIELD_WRITE = re.compile(
    OBJECT_RECEIVERS + r"\.(?:" + OBJECT_FIELDS + r")"
    r"(?:(?:\[[^\]\n]*\])*\s*(?:[-+|&^]|<<|>>)?=(?!=)"
    r"|\??\.(?:insert|remove|removeAll|removeFirst|removeLast|formUnion|formIntersection|subtract|append|"
    r"replaceObjectIDs|set)\b)")


# --- 5. Unsafe constructs ---------------------------------------------------------------------

UNSAFE = re.compile(r"\bUnmanaged\b|\b_withUnsafeGuaranteedRef\b|\bunowned\(unsafe\)|@exclusivity\(unchecked\)"
                    r"|\bUnsafe(?:Mutable)?(?:Raw)?(?:Buffer)?Pointer\b")
SAFETY = re.compile(r"^\s*// Safety: \S", re.M)


def check_unsafe():
    table = {}
    for path, source in SOURCES.items():
        lines = sorted(set(source.matches(UNSAFE, source.code, ("Unsafe", "Unmanaged", "unowned(unsafe)", "exclusivity"))))
        arguments = source.matches(SAFETY, source.text, ("// Safety:",))
        if lines:
            table[path] = len(lines)
            if path not in UNSAFE_FILES:
                plural = "s" if len(lines) != 1 else ""
                finding(path, lines[0], f"unsafe construct in a file not in UNSAFE_FILES ({len(lines)} line{plural}): "
                                        "state its safety argument on a `// Safety:` line and list the file")
            elif len(lines) > UNSAFE_FILES[path]:
                finding(path, lines[0], f"{len(lines)} lines use unsafe constructs, UNSAFE_FILES says {UNSAFE_FILES[path]}: "
                                        "read the `// Safety:` argument against the new uses, then raise the count")
            elif len(lines) < UNSAFE_FILES[path]:
                notes.append(f"note: {path} has {len(lines)} lines with unsafe constructs, "
                             f"UNSAFE_FILES {UNSAFE_FILES[path]}: lower it")
        if path in UNSAFE_FILES or lines:
            if path in UNSAFE_FILES and not arguments:
                finding(path, 1, "no `// Safety:` comment line stating why its unsafe constructs are safe")
            elif len(arguments) > 1:
                finding(path, arguments[1], "a second `// Safety:` line: state the file's argument once")
    for path in sorted(set(UNSAFE_FILES) - set(table)):
        notes.append(f"note: {path} uses no unsafe construct any more: remove it from UNSAFE_FILES (and its `// Safety:`)")
    report["unsafe constructs"] = dict(sorted(table.items()))
    for module in sorted({"/".join(path.split("/")[:2]) for path in table}):
        files = [path for path in table if path.startswith(module + "/")]
        report["unsafe constructs"][f"{module} ({len(files)} files)"] = sum(table[path] for path in files)
    report["unsafe constructs"]["total"] = sum(table.values())


# --- 6. Doc references ------------------------------------------------------------------------

REFERENCE = re.compile(r'\.md\)?,[ \t]*"([^"\n]{1,150})"((?:(?:,|,? and)[ \t]*"[^"\n]{1,150}")*)')
REFERENCE_PATH = re.compile(r'((?:[\w.-]+/)*[\w-]+)$')
FURTHER_SECTION = re.compile(r'"([^"\n]{1,150})"')
COMMENT_PREFIX = re.compile(r"^[ \t]*(?:///?|\*)?[ \t]?")
_headings = {}


def normalised(title):
    title = title.replace("`", "")
    title = re.sub(r"\\\s", " ", title)  # a Swift multi-line string's line continuation
    title = re.sub(r"\s+", " ", title).strip()
    return title.rstrip(".,:;!?").strip()


def headings(path):
    """A Markdown file's headings and bold run-in labels, outside fenced code blocks."""
    if path not in _headings:
        found, fence = set(), None
        for line in open(path, encoding="utf-8"):
            if fence:
                if re.match(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$", line):
                    fence = None
                continue
            m = re.match(r"^ {0,3}(`{3,}|~{3,})(.*)$", line)
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence = m.group(1)
                continue
            m = re.match(r"^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$", line)
            if m:
                found.add(normalised(m.group(1)))
                continue
            m = re.match(r"^\s*(?:[-*+]\s+|\d+\.\s+)?\*\*(.+?)\*\*", line)
            if m:
                found.add(normalised(m.group(1)))
        _headings[path] = found
    return _headings[path]


def check_doc_references():
    citing = [p for p in glob.glob("Sources/**/*", recursive=True) + glob.glob("Tests/**/*", recursive=True)
              if p.endswith((".swift", ".md")) and os.path.isfile(p)]
    citing += glob.glob("docs/*.md") + ["README.md", "CONTRIBUTING.md"]
    count, allowed_seen = 0, set()
    for path in sorted(set(citing)):
        lines = [COMMENT_PREFIX.sub("", line, count=1) for line in open(path, encoding="utf-8").read().split("\n")]
        starts, offset = [], 0
        for line in lines:
            starts.append(offset)
            offset += len(line) + 1
        joined = " ".join(lines)  # a reference may wrap, in a comment or a paragraph
        if ".md" not in joined:
            continue
        for m in REFERENCE.finditer(joined):
            stem = REFERENCE_PATH.search(joined, max(0, m.start() - 200), m.start())
            if not stem:
                continue
            target = stem.group(1) + ".md"
            candidates = [os.path.normpath(os.path.join(os.path.dirname(path), target)), target,
                          os.path.join("docs", os.path.basename(target))]
            resolved = next((c for c in candidates if os.path.isfile(c)), None)
            line = bisect.bisect_right(starts, stem.start())
            if resolved is None:
                count += 1
                finding(path, line, f"{target} does not exist")
                continue
            for section in [m.group(1)] + FURTHER_SECTION.findall(m.group(2)):
                count += 1
                section = normalised(section)
                if section in headings(resolved):
                    continue
                key = (path, resolved, section)
                if key in DOC_REFERENCES:
                    allowed_seen.add(key)
                    continue
                finding(path, line, f'{resolved} has no heading "{section}"')
    for key in sorted(set(DOC_REFERENCES) - allowed_seen):
        notes.append(f"note: DOC_REFERENCES lists {key}, which no longer fails: remove it")
    report["doc references"] = {"allow-listed": len(allowed_seen), "total": count}


# --- 7. Model walks --------------------------------------------------------------------------

FOR_LOOP = re.compile(r"^[ \t]*for\b[^{\n]*\{", re.M)
BY_NAME = re.compile(r"\b(?:relationshipsByName|attributesByName)\[")
STEP = re.compile(r"^[ \t]*\w+\s*=(?!=)\s*[\w.!?]+\s*$", re.M)


def check_model_walks():
    """A `for` loop whose body looks properties up by name and steps a variable to the next
    (a bare `name = other` line) walks a key path over the model: ModelKeyPath's job."""
    uses = {}
    for path in (p for p in SWIFT if p.startswith("Sources/Arbor/") and p != MODEL_WALK_OWNER):
        source = SOURCES[path]
        code = source.code
        flagged_until = -1
        for match in FOR_LOOP.finditer(code):
            if match.start() < flagged_until:
                continue  # inside a loop already counted
            depth, end = 0, match.end() - 1
            for end in range(match.end() - 1, len(code)):
                depth += {"{": 1, "}": -1}.get(code[end], 0)
                if depth == 0:
                    break
            body = code[match.end():end]
            if BY_NAME.search(body) and STEP.search(body):
                flagged_until = end
                uses.setdefault(path, []).append(source.line_of(match.start()) + (1 if code[match.start()] == "\n" else 0))
    judge_uses(uses, MODEL_WALKS, "model walks", "a key path walked over the model by hand: resolve it with ModelKeyPath")


# --- Run --------------------------------------------------------------------------------------

def main():
    arbor = [p for p in SWIFT if p.startswith("Sources/Arbor/")]
    context = [p for p in arbor if p.startswith("Sources/Arbor/Context/")]
    steps = [
        check_long_functions,
        lambda: check_counted("uses", METADATA_KEY, ("arbor.metadata", "Array(\""), SWIFT, METADATA_USERS, METADATA_OWNER,
                              f"\"arbor.metadata\", or a metadata key spelt out, outside its owner ({METADATA_OWNER}): "
                              "use the owner's accessors and its MetadataKey catalogue"),
        lambda: check_counted("splits", KEY_PATH_SPLIT, ("split(",), arbor, KEY_PATH_SPLITS, KEY_PATH_OWNER,
                              "a key path split at dots outside KeyPathEvaluator.keys(of:): call it"),
        lambda: check_counted("writes", OBJECT_FIELD_WRITE, (".",), context, OBJECT_FIELD_WRITES, None,
                              "a managed object's internal field written from Context/: give ManagedObject a method for it",
                              text="code"),
        check_unsafe,
        check_doc_references,
        check_model_walks,
        lambda: check_counted("uses", NATIVE_INSIDE, ("NativeStore", ".database"),
                              [p for p in arbor if not p.startswith(NATIVE_STORE_FOLDER)], NATIVE_INSIDES, None,
                              "the native store's insides (a downcast to NativeStore, or its engine database) outside "
                              "Sources/Arbor/NativeStore/: ask the coordinator for a capability", text="code"),
    ]
    for name, step in zip(CHECKS, steps):
        running[0] = name
        step()
    if "--report" in sys.argv[1:]:
        for name in CHECKS:
            counts = report[name]
            print(f"{name}:")
            width = max(len(key) for key in counts)
            for key, value in counts.items():
                print(f"  {key:<{width}}  {value}")
    for line in notes:
        print(line)
    for line in findings:
        print(line, file=sys.stderr)
    totals = ", ".join(f"{name} {report[name]['total']}" for name in CHECKS)
    if findings:
        failing = ", ".join(f"{name} {count}" for name, count in per_check.items() if count)
        print(f"check-habits: {len(findings)} finding{'s' if len(findings) != 1 else ''} ({failing}); "
              f"counted: {totals} (CONTRIBUTING.md, \"Checks that run with make test\")", file=sys.stderr)
        sys.exit(1)
    print(f"check-habits: no findings; counted: {totals}")


if __name__ == "__main__":
    main()
