// swift-tools-version: 6.1
//
// Benchmarks for Arbor, a package of its own so library users never pull benchmark dependencies.
//
//   swift package --allow-writing-to-package-directory benchmark   # package-benchmark run
//   swift run -c release CommitReport [commits]                     # the commit table in docs/performance.md
//   swift run -c release EngineReport [rows]                        # the engine table in docs/performance.md
//   swift run -c release ContextSaveReport [saves] [rounds]         # concurrent saves from 1, 2, 4 contexts
//   swift run -c release UndoReport [changes] [objects] [rounds]    # change tracking with and without undo
//   swift run -c release RelationalReport                           # relational steps against GRDB (RELATIONAL_* settings)
//   swift run -c release MigrationReport [rows] [rounds]            # schema migration against SQLite
//   swift run -c release TrackerReport                              # an issue tracker's relational shapes against SQLite
//
// Needs libsqlite3-dev (the Makefile's `bench` and `bench-report` targets install it).

import PackageDescription

/// Swift 6 language mode everywhere, as in the root package.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
]

let package = Package(
    name: "ArborBenchmarks",
    platforms: [.macOS(.v13)],  // package-benchmark's own minimum
    dependencies: [
        .package(name: "Arbor", path: "../"),
        // Trait `MallocInterposer`: package-benchmark counts allocations through its own malloc
        // interposer (the `mallocCountTotal` metric). Naming the trait is required here (without
        // it, resolution fails on these machines); it also replaces the package's default traits,
        // so `RuntimeInterposer` (retain/release counting on Linux with Swift 6.3) stays off.
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        // The object graph's peer: GRDB's records on the system SQLite.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // The SQLite C API from the system (Debian: libsqlite3-dev), the peer we measure against.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // A VFS that wraps SQLite's default (unix) VFS and counts syncs: journal, database and
        // directory. See Sources/SQLiteSyncCounter/include/SQLiteSyncCounter.h for what is counted.
        .target(
            name: "SQLiteSyncCounter",
            dependencies: ["CSQLite"]
        ),
        // The two durable-commit workloads, shared by the benchmark and the report.
        .target(
            name: "CommitWorkloads",
            dependencies: [
                "CSQLite",
                "SQLiteSyncCounter",
                .product(name: "ArborStore", package: "Arbor"),
                .product(name: "ArborTestSupport", package: "Arbor"),
            ],
            swiftSettings: swiftSettings
        ),
        // package-benchmark target (the layout it requires: Benchmarks/<Target>/<Target>.swift).
        .executableTarget(
            name: "Commits",
            dependencies: [
                "CommitWorkloads",
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/Commits",
            swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // A plain executable printing the markdown table recorded in docs/performance.md.
        .executableTarget(
            name: "CommitReport",
            dependencies: ["CommitWorkloads"],
            swiftSettings: swiftSettings
        ),
        // The engine workloads (bulk insert, point reads, scans, text keys, text-heavy values), Arbor
        // and SQLite with the same page size and cache budget; shared by the benchmark and the report.
        .target(
            name: "EngineWorkloads",
            dependencies: [
                "CSQLite",
                "CommitWorkloads",
                .product(name: "ArborStore", package: "Arbor"),
                .product(name: "ArborTestSupport", package: "Arbor"),
            ],
            swiftSettings: swiftSettings
        ),
        // package-benchmark target for the engine workloads at a smaller scale.
        .executableTarget(
            name: "Engine",
            dependencies: [
                "EngineWorkloads",
                "CommitWorkloads",
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/Engine",
            swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // One Arbor workload repeated, for profilers (perf, callgrind); no SQLite, no report.
        .executableTarget(
            name: "EngineProfile",
            dependencies: ["EngineWorkloads", "CommitWorkloads"],
            swiftSettings: swiftSettings
        ),
        // A full scan's cost per row: the engine's leaf walk against Arbor's fetch path.
        .executableTarget(name: "ScanProbe", dependencies: ["GraphWorkloads", .product(name: "ArborStore", package: "Arbor")],
                          swiftSettings: swiftSettings),
        // The object graph's workloads, Arbor alone, for profilers and quick measurements.
        .executableTarget(
            name: "ObjectGraphProfile",
            dependencies: ["CommitWorkloads", .product(name: "Arbor", package: "Arbor"), .product(name: "ArborStore", package: "Arbor"), .product(name: "ArborTestSupport", package: "Arbor")],
            swiftSettings: swiftSettings
        ),
        // The object-graph workloads on Arbor and on GRDB records (issue 4, item 11).
        .target(
            name: "GraphWorkloads",
            dependencies: [
                "CommitWorkloads",
                .product(name: "Arbor", package: "Arbor"),
                .product(name: "ArborStore", package: "Arbor"),
                .product(name: "ArborTestSupport", package: "Arbor"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // package-benchmark target for the object-graph workloads (Arbor and GRDB in one run).
        .executableTarget(
            name: "ObjectGraph",
            dependencies: [
                "GraphWorkloads",
                "CommitWorkloads",
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/ObjectGraph",
            swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Prints the object-graph table of docs/performance.md (Arbor and GRDB in one run).
        .executableTarget(
            name: "ObjectGraphReport",
            dependencies: ["GraphWorkloads", "CommitWorkloads"],
            swiftSettings: swiftSettings
        ),
        // The floor under the fetch-of-all goal (issue 4, item 11): a minimal stand-in for
        // uniqued objects over a row cache, next to GRDB's fetchAll in the same run.
        .executableTarget(
            name: "FetchFloor",
            dependencies: ["GraphWorkloads", "CommitWorkloads"],
            swiftSettings: swiftSettings
        ),
        // Prints the fetch table of docs/performance.md (issue 5: Arbor and GRDB in one run).
        .executableTarget(
            name: "FetchReport",
            dependencies: ["GraphWorkloads", "CommitWorkloads"],
            swiftSettings: swiftSettings
        ),
        // The relational workload of issue 26, item 9 (key paths through relationships, grouped and
        // to-many aggregates, a many-to-many, text search, bulk update, cascade delete) on Arbor
        // and on GRDB records with associations; peak memory comes from EngineWorkloads.
        .target(
            name: "RelationalWorkloads",
            dependencies: [
                "CommitWorkloads",
                "EngineWorkloads",
                "GraphWorkloads",
                .product(name: "Arbor", package: "Arbor"),
                .product(name: "ArborStore", package: "Arbor"),
                .product(name: "ArborTestSupport", package: "Arbor"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // Prints the relational tables of docs/performance.md (make bench-relational): each
        // engine in a fresh process per round, default and equal caches, import memory.
        .executableTarget(
            name: "RelationalReport",
            dependencies: ["RelationalWorkloads", "CommitWorkloads", "EngineWorkloads"],
            swiftSettings: swiftSettings
        ),
        // An issue tracker (another model): the shapes of docs/predicates.md that run in the
        // store, against the SQL SQLite's planner gets for the same questions (through GRDB).
        .executableTarget(
            name: "TrackerReport",
            dependencies: [
                "CommitWorkloads",
                .product(name: "Arbor", package: "Arbor"),
                .product(name: "ArborStore", package: "Arbor"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // Durable saves from 1, 2 and 4 writers at once on one file (issue 6, item 10): private-queue
        // contexts on one coordinator, SQLite with as many connections and with one shared connection.
        .target(
            name: "ContextSaveWorkloads",
            dependencies: [
                "CSQLite",
                "CommitWorkloads",
                .product(name: "Arbor", package: "Arbor"),
            ],
            swiftSettings: swiftSettings
        ),
        // package-benchmark target for the concurrent saves (Arbor and SQLite in one run).
        .executableTarget(
            name: "ContextSaves",
            dependencies: [
                "ContextSaveWorkloads",
                "CommitWorkloads",
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/ContextSaves",
            swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Prints the concurrent-saves table of docs/performance.md (all engines in one run).
        .executableTarget(
            name: "ContextSaveReport",
            dependencies: ["ContextSaveWorkloads", "CommitWorkloads"],
            swiftSettings: swiftSettings
        ),
        // One change in a fetched-results controller against fetching again (issue 28, item 6).
        .executableTarget(
            name: "ResultsControllerReport",
            dependencies: [.product(name: "Arbor", package: "Arbor")],
            swiftSettings: swiftSettings
        ),
        // Reads of a context pinned to a query generation against unpinned ones, as changes
        // since the generation grow (issue 28, item 5; make bench-generations).
        .executableTarget(
            name: "QueryGenerationReport",
            dependencies: [.product(name: "Arbor", package: "Arbor")],
            swiftSettings: swiftSettings
        ),
        // Change tracking with and without an undo manager (issue 7, item 5): prints the undo
        // table of docs/performance.md (make bench-undo).
        .executableTarget(
            name: "UndoReport",
            dependencies: ["CommitWorkloads", "EngineWorkloads", .product(name: "Arbor", package: "Arbor")],
            swiftSettings: swiftSettings
        ),
        // Schema migration against SQLite (issue 27, item 7): adding a column, and a rewrite of
        // every row (make bench-migration).
        .executableTarget(
            name: "MigrationReport",
            dependencies: ["CommitWorkloads", "EngineWorkloads", "CSQLite", .product(name: "Arbor", package: "Arbor")],
            swiftSettings: swiftSettings
        ),
        // Prints the engine table of docs/performance.md (one process, both engines).
        .executableTarget(
            name: "EngineReport",
            dependencies: ["EngineWorkloads", "CommitWorkloads"],
            swiftSettings: swiftSettings
        ),
    ]
)
