import ArgumentParser
import ArborStore

@main
struct ArborCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "arbor",
        abstract: "Inspect and maintain Arbor database files.",
        version: "0.1.0",
        subcommands: []
    )
}
