import ArgumentParser
import Arbor
import ArborStore

/// `arbor migrate`: checks, on a copy, that a store migrates to a newer model.
struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check that a store migrates to the model of another store, on a copy; the store is not written.",
        discussion: """
            Copies the store, migrates the copy to the model that the store given with --to keeps \
            (a store made by the new version of the application), and prints each entity's \
            objects before and after, what the migration did or why it fails, and the time \
            (docs/migration.md, "Verify before you ship"). A stored model keeps the structure, \
            not defaults or validation rules, so those are checked by the application's own \
            NativeStore.verifyMigration. Exit status 1 when the migration would fail.
            """
    )

    @Argument(help: "The store to check.") var file: String
    @Option(name: .long, help: "A store made with the new model.") var to: String

    func run() throws {
        try reportingErrors {
            var options = DatabaseOptions()
            options.readOnly = true
            options.create = false
            let model = try ManagedObjectModel.stored(in: to, options: options)
            let check = try NativeStore.verifyMigration(at: file, to: model)
            print(check)
            if !check.succeeded { throw ExitCode(1) }
        }
    }
}
