// swift-tools-version: 6.2
//
// Arbor: Core Data's object-graph programming model for Swift on Linux (and any Swift platform),
// on a storage engine of its own. See README.md and docs/architecture.md.
//
// Tools version 6.2: traits need 6.1, and from 6.2 on SwiftPM lets a package that depends on
// Arbor by version accept the unsafe flag of the `OptimizedInDebug` trait (swift-package-manager
// PR #8951; before, it refused any package with unsafe flags unless it was a local path).

import PackageDescription

/// Settings shared by every target: Swift 6 language mode everywhere, and Arbor's own checks
/// when the `Checks` trait is on (see `traits` below).
///
/// - `ARBOR_QUEUE_CHECKS`: every context and managed-object entry point checks that it runs on
///   its context's queue, and stops the program naming the context and the call when it does
///   not (docs/concurrency.md, "Checks in debug builds"). About 570 instructions a check in a
///   debug build, under 1 % of a debug import's (docs/debug-builds.md).
/// - `ARBOR_INVARIANTS`: checks of a context's change lists at the end of every event, of every
///   B-tree node the engine rewrites whole (splits, merges, batches), of the page cache's pins as
///   every transaction ends, and of the coordinator's row cache after every save and at every
///   release: a broken invariant stops the program where it broke instead of corrupting a save
///   later (docs/debug-builds.md).
///
/// Both need the `Checks` trait *and* a debug build: a dependent's debug build has neither
/// unless it asks for the trait, and release builds never have them.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .define("ARBOR_QUEUE_CHECKS", .when(configuration: .debug, traits: ["Checks"])),
    .define("ARBOR_INVARIANTS", .when(configuration: .debug, traits: ["Checks"])),
]

/// The library targets' settings (ArborStore, Arbor): those above, and `-O` in debug builds when
/// the `OptimizedInDebug` trait is on. SwiftPM passes `-Onone` first and a target's own flags
/// after it, so the last wins: Arbor's code is optimised while the application's own stays
/// unoptimised and debuggable (`DEBUG` stays defined). Debug builds are not whole-module, so
/// this is slower than a release build, but several times faster than plain debug
/// (docs/debug-builds.md has the figures).
let librarySettings: [SwiftSetting] = swiftSettings + [
    .unsafeFlags(["-O"], .when(configuration: .debug, traits: ["OptimizedInDebug"])),
]

let package = Package(
    name: "Arbor",
    // The engine uses the standard library's `Mutex` and `Atomic` (Synchronization), which Apple's
    // platforms have from these releases on; Linux has them with every Swift 6 toolchain.
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "ArborStore", targets: ["ArborStore"]),
        .library(name: "Arbor", targets: ["Arbor"]),
        .library(name: "ArborTestSupport", targets: ["ArborTestSupport"]),
        .executable(name: "arbor", targets: ["arbor"]),
    ],
    // Package traits (SwiftPM 6.1). None is on by default: a package depending on Arbor builds
    // it as it is unless it names a trait, as in
    // `.package(url: "…/Arbor", from: "…", traits: ["Checks"])`, or with
    // `swift build --traits Checks` when Arbor is the root package. Arbor's own `make test`,
    // `make tsan` and CI build with `Checks` (docs/debug-builds.md). Traits are unified across a
    // package graph: one package asking for a trait turns it on for all.
    traits: [
        // `librarySettings` above: Arbor optimised in an application's debug builds.
        .trait(
            name: "OptimizedInDebug",
            description: "Debug builds compile ArborStore and Arbor optimised (-O) while the application's own code stays unoptimised: for debug builds that import or fetch much."
        ),
        // `swiftSettings` above: ARBOR_QUEUE_CHECKS and ARBOR_INVARIANTS in debug builds.
        .trait(
            name: "Checks",
            description: "Debug builds check that contexts and managed objects are used on their queue (ARBOR_QUEUE_CHECKS) and check the change lists' and B-tree nodes' invariants (ARBOR_INVARIANTS)."
        ),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        // OrderedSet for to-many relationships (ordered and unordered) in the object graph.
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        // Logging (store open and recovery, busy waits, slow fetches, failed saves) and metrics
        // (cache hits and misses, commits, syncs, latencies): docs/observability.md.
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // `swift package generate-documentation` (`make docs`): the DocC catalogues of Arbor and
        // ArborStore.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // Tests only: property-based testing with shrinking (Swift Testing).
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
    ],
    targets: [
        // liblz4 from the system (Debian: liblz4-dev). `make` installs it when the header is missing.
        .systemLibrary(
            name: "CLZ4",
            pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"])]
        ),
        // One entry point of the Swift runtime the object registry needs (swift_tryRetain:
        // loading an entry of an object that may be ending on another thread). Header only.
        .systemLibrary(name: "CSwiftRuntime"),
        // The storage engine: file-system seam, pager with rollback journal and locks, B+tree.
        .target(
            name: "ArborStore",
            dependencies: [
                "CLZ4",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: librarySettings
        ),
        // The object graph (Core Data's programming model) on the engine.
        .target(
            name: "Arbor",
            dependencies: [
                "ArborStore",
                "CSwiftRuntime",
                .product(name: "OrderedCollections", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: librarySettings
        ),
        // Shared by the tests, Fuzz/ and Benchmarks/: the simulated disk, seeded generators, oracles.
        .target(
            name: "ArborTestSupport",
            dependencies: ["Arbor", "ArborStore", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        // The `arbor` command-line tool.
        .executableTarget(
            name: "arbor",
            dependencies: [
                "ArborStore",
                "Arbor",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ArborStoreTests",
            dependencies: [
                "ArborStore", "ArborTestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ArborTests",
            dependencies: [
                "Arbor", "ArborTestSupport",
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            // Stores written by earlier builds, read by FixtureStoreTests from the source tree.
            exclude: ["Fixtures"],
            swiftSettings: swiftSettings
        ),
        // The Swift blocks of README.md and docs/*.md, compiled: Scripts/doc-examples.py (run by
        // `make test` before the build) writes them into Tests/DocExampleTests/Generated/.
        .testTarget(
            name: "DocExampleTests",
            dependencies: ["Arbor", "ArborStore"],
            swiftSettings: swiftSettings
        ),
        // End-to-end tests of the `arbor` binary (and the multi-process tests, which spawn it).
        .testTarget(
            name: "arborCLITests",
            dependencies: ["arbor", "Arbor", "ArborStore", "ArborTestSupport"],
            swiftSettings: swiftSettings
        ),
    ]
)
