import ArgumentParser
import Arbor
import ArborStore

/// `arbor migrate`: checks, on a copy, that a store migrates to a newer model.
struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check, on a copy, that a store migrates to the model of another store; the store is never written.",
        discussion: """
            Copies the store, migrates the copy to the model that the store given with --to keeps \
            (a store made by the new version of the application), and prints each entity's \
            objects before and after, what the migration did or why it fails, what it drops or \
            would drop (objects, values and links, with their counts), and the time. It is \
            always a dry run (--dry-run says so explicitly): the application migrates the store \
            when it opens it with its new model. A migration never drops data unless a plan's \
            stage names it; --drop names such data here, in the store's names (Entity or \
            Entity.property), to check the migration that plan would run. A stored model keeps \
            the structure and defaults; validation rules only in words, so those are checked by \
            the application's own NativeStore.verifyMigration. Exit status 1 when the migration \
            would fail.
            """
    )

    @Argument(help: "The store to check.") var file: String
    @Option(name: .long, help: "A store made with the new model.") var to: String
    @Flag(name: .long, help: "Only check, on a copy (always the case; accepted for clarity).") var dryRun = false
    @Option(name: .long, help: "Data the migration may drop: an entity (Tag) or a property (Book.subtitle), in the store's names. Repeatable.")
    var drop: [String] = []

    func run() throws {
        try reportingErrors {
            var options = DatabaseOptions()
            options.readOnly = true
            options.create = false
            let model = try ManagedObjectModel.stored(in: to, options: options)
            var migration = MigrationOptions()
            if !drop.isEmpty {
                // The drops belong to a plan's stage from the store's own model to the new one.
                let current = try ManagedObjectModel.stored(in: file, options: options)
                migration.plan = MigrationPlan(startingAt: current).lightweight(to: model, dropping: Set(drop.map(Self.drop)))
            }
            let check = try NativeStore.verifyMigration(at: file, to: model, migration: migration)
            print("\(file): \(check)")
            if !check.succeeded { throw ExitCode(1) }
        }
    }

    /// `Tag` or `Book.subtitle`.
    static func drop(_ text: String) -> MigrationDrop {
        guard let dot = text.firstIndex(of: ".") else { return .entity(text) }
        return .property(String(text[text.index(after: dot)...]), of: String(text[..<dot]))
    }
}
