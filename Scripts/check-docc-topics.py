#!/usr/bin/env python3
"""Lists the public types, functions and variables a DocC catalogue's Topics leave out.

Usage: Scripts/check-docc-topics.py ARCHIVE.doccarchive [ARCHIVE.doccarchive ...]

`make docs` runs it on the archives it has just built. DocC files every top-level symbol the
catalogue does not curate under a section of its own making ("Classes", "Structures",
"Enumerations", "Protocols", "Type Aliases", "Functions", …), marked `"generated": true` in the
module page's render JSON (`data/documentation/<module>.json`). Each such symbol is missing from
the catalogue's Topics (`Sources/<Module>/<Module>.docc/<Module>.md`): the script names it and
exits 1. "Extended Modules" (the standard types a module extends) is always DocC's own and is not
counted. Exit 0: every top-level symbol of every archive is curated.
"""

import json
import pathlib
import sys

# DocC's own section for the types of other modules that a module extends (Int, Array, Date, …).
EXTENDED_MODULES = "Extended Modules"


def module_page(archive: pathlib.Path) -> pathlib.Path:
    pages = sorted((archive / "data" / "documentation").glob("*.json"))
    if len(pages) != 1:
        sys.exit(f"check-docc-topics: {archive}: expected one module page, found {len(pages)}; "
                 "is it a DocC archive of one module?")
    return pages[0]


def check(archive: pathlib.Path) -> int:
    page = json.loads(module_page(archive).read_text())
    module = page["metadata"]["title"]
    references = page.get("references", {})
    curated, missing = 0, []
    for section in page.get("topicSections", []):
        if section.get("title") == EXTENDED_MODULES:
            continue
        symbols = [i for i in section["identifiers"]
                   if references.get(i, {}).get("kind") == "symbol"]
        if section.get("generated"):
            missing += [(section["title"], references[i]["title"]) for i in symbols]
        else:
            curated += len(symbols)
    catalogue = f"Sources/{module}/{module}.docc/{module}.md"
    if missing:
        count = "1 public symbol is" if len(missing) == 1 else f"{len(missing)} public symbols are"
        print(f"{module}: {count} missing from the Topics of {catalogue}:")
        for kind, name in missing:
            print(f"  {name} ({kind})")
        return 1
    print(f"{module}: all {curated} top-level public symbols are in the Topics of {catalogue}")
    return 0


def main() -> int:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    failures = sum(check(pathlib.Path(arg)) for arg in sys.argv[1:])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
