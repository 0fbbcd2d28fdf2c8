// swift-tools-version: 6.1
//
// libFuzzer targets for Arbor, a package of their own so library users never build them.
// Build (see Makefile `fuzz-smoke`):
//   swift build -c release --product FuzzPager --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address

import PackageDescription

let package = Package(
    name: "ArborFuzz",
    dependencies: [
        .package(name: "Arbor", path: "../"),
    ],
    targets: [
        // Bytes → a database image (and optionally a journal) opened, recovered, checked and read.
        .executableTarget(
            name: "FuzzPager",
            dependencies: [
                .product(name: "ArborStore", package: "Arbor"),
                .product(name: "ArborTestSupport", package: "Arbor"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Bytes → format arguments and a predicate format string parsed, printed and reparsed, and evaluated.
        .executableTarget(
            name: "FuzzPredicate",
            dependencies: [
                .product(name: "Arbor", package: "Arbor"),
                .product(name: "ArborTestSupport", package: "Arbor"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Bytes → a fetch (predicate, sorts, window; or a grouping; with or without unsaved
        // changes) of a fixed graph: the store's answer against in-memory evaluation.
        .executableTarget(
            name: "FuzzPlanner",
            dependencies: [
                .product(name: "Arbor", package: "Arbor"),
                .product(name: "ArborTestSupport", package: "Arbor"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
