// swift-tools-version: 6.1
//
// A package that depends on Arbor as an application would, by path: what a dependent's debug
// build costs (docs/debug-builds.md), and whether Arbor's checks are off in it unless asked for.
//
//   swift run DependentImport [issues] [rounds]              # debug build: Arbor unoptimised
//   swift run -c release DependentImport [issues] [rounds]   # release build (keeps -g)
//   swift run --traits ArborChecks DependentImport           # debug, with Arbor's `Checks` trait
//   swift run --traits ArborOptimized DependentImport        # debug, Arbor optimised (`OptimizedInDebug`)
//   swift run ChecksProbe                                    # says whether Arbor's checks are on
//
// `make bench-debug` and `make check-dependent` run these.

import PackageDescription

let package = Package(
    name: "DependentImport",
    platforms: [.macOS(.v15)],  // Arbor's own minimum
    // `ArborChecks` and `ArborOptimized` pass on Arbor's `Checks` (queue checks and invariants
    // in debug builds) and `OptimizedInDebug` traits, as a dependent that wants them asks.
    // Off by default, as Arbor's are.
    traits: [
        .trait(name: "ArborChecks", description: "Build Arbor with its Checks trait (queue checks and invariants in debug builds)."),
        .trait(name: "ArborOptimized", description: "Build Arbor optimised in debug builds (its OptimizedInDebug trait)."),
    ],
    dependencies: [
        .package(name: "Arbor", path: "../..", traits: [
            .trait(name: "Checks", condition: .when(traits: ["ArborChecks"])),
            .trait(name: "OptimizedInDebug", condition: .when(traits: ["ArborOptimized"])),
        ]),
    ],
    targets: [
        // Imports issues across projects into a store file, in batches, and times it.
        .executableTarget(
            name: "DependentImport",
            dependencies: [.product(name: "Arbor", package: "Arbor")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Uses a context off its queue: stops the program when Arbor's queue checks are on.
        .executableTarget(
            name: "ChecksProbe",
            dependencies: [.product(name: "Arbor", package: "Arbor")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
