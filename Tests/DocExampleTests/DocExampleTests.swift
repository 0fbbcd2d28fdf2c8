import Arbor
import Foundation
import Testing

// The Swift blocks of README.md and docs/*.md, compiled. `Scripts/doc-examples.py` (run by
// `make test` before the build) writes one file per page into Generated/ (git-ignored); this
// target compiles them against Arbor and ArborStore, so an example that stops compiling fails
// the build, the error naming the page and line. Nothing generated runs: the README's and the
// porting guide's programs run in ArborTests (`ReadmeObjectGraphTests`,
// `PortingGuideExampleTests`) and ArborStoreTests (`ReadmeExampleTests`).

/// A department of the model most pages' fragments assume (``DocFixture``).
final class Department: ManagedObject {
    @Managed("name") var name: String
    @Managed("budget") var budget: Decimal?
    @ManagedSet("employees") var employees: Set<Employee>
}

/// An employee of the model most pages' fragments assume (``DocFixture``).
final class Employee: ManagedObject {
    @Managed("firstName") var firstName: String
    @Managed("lastName") var lastName: String
    @Managed("salary") var salary: Decimal?
    @Managed("startDate") var startDate: Date?
    @Managed("department") var department: Department?
    @Managed("manager") var manager: Employee?
    @ManagedSet("directReports") var directReports: Set<Employee>
    @ManagedSet("timesheets") var timesheets: Set<Timesheet>
}

/// A week's hours of an employee (``DocFixture``).
final class Timesheet: ManagedObject {
    @Managed("week") var week: Int
    @Managed("hours") var hours: Int
    @Managed("employee") var employee: Employee?
}

/// The world of the pages' fragments: a page's hidden setup (`<!-- doc-test: setup … -->`)
/// takes its context from here, and its `Employee`, `Department` and `Timesheet` are the
/// classes above (a page that declares its own shadows them).
enum DocFixture {
    /// Employee, Department and Timesheet, as README.md and docs/contexts.md describe them.
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Department", class: Department.self) {
                Attribute("name", .string).required()
                Attribute("budget", .decimal)
                Relationship("employees", to: "Employee", inverse: "department").toMany().deleteRule(.cascade)
                Unique("name")
            }
            Entity("Employee", class: Employee.self) {
                Attribute("firstName", .string).required()
                Attribute("lastName", .string).required()
                Attribute("salary", .decimal).defaultValue(Decimal(50_000)).minimum(Decimal(0))
                Attribute("startDate", .date)
                Relationship("department", to: "Department", inverse: "employees")
                Relationship("manager", to: "Employee", inverse: "directReports")
                Relationship("directReports", to: "Employee", inverse: "manager").toMany()
                Relationship("timesheets", to: "Timesheet", inverse: "employee").toMany().deleteRule(.cascade)
            }
            Entity("Timesheet", class: Timesheet.self) {
                Attribute("week", .integer32).required()
                Attribute("hours", .integer32).required()
                Relationship("employee", to: "Employee", inverse: "timesheets")
            }
        }
    }

    /// A container of the model over an in-memory store, loaded.
    static func container() throws -> PersistentContainer {
        let container = PersistentContainer(name: "Employees", managedObjectModel: try model())
        container.persistentStoreDescriptions = [PersistentStoreDescription(type: .inMemory)]
        try container.loadPersistentStores()
        return container
    }

    /// A confinement context on a new container's coordinator (one thread, no queue).
    static func context() throws -> ManagedObjectContext {
        ManagedObjectContext(persistentStoreCoordinator: try container().persistentStoreCoordinator)
    }
}

@Suite struct DocExampleTests {
    /// The package's root (this file is Tests/DocExampleTests/DocExampleTests.swift).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The pages Scripts/doc-examples.py reads.
    static func pages() throws -> [URL] {
        let docs = root.appendingPathComponent("docs")
        let names = try FileManager.default.contentsOfDirectory(atPath: docs.path).filter { $0.hasSuffix(".md") }.sorted()
        return [root.appendingPathComponent("README.md")] + names.map { docs.appendingPathComponent($0) }
    }

    /// 64-bit FNV-1a of `bytes` in hex, as the script writes it into each generated file.
    static func fnv1a(_ bytes: some Sequence<UInt8>) -> String {
        var value: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { value = (value ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Every page with a Swift block to compile has its generated file, made from the page as it
    /// is now: the build compiled the examples the pages show, not an older copy.
    @Test func everyPageIsGeneratedFromItsCurrentText() throws {
        let generated = Self.root.appendingPathComponent("Tests/DocExampleTests/Generated")
        var checked = 0
        for page in try Self.pages() {
            let data = try Data(contentsOf: page)
            let text = String(decoding: data, as: UTF8.self)
            let compiled = text.split(separator: "\n", omittingEmptySubsequences: false).contains { line in
                let fence = line.drop { $0 == " " }
                return fence.hasPrefix("```swift") && !fence.contains("ignore")
            }
            guard compiled else { continue }
            let name = page.deletingPathExtension().lastPathComponent.map { $0.isLetter || $0.isNumber ? $0 : "_" }
            let file = generated.appendingPathComponent(String(name) + ".swift")
            let source = try? String(contentsOf: file, encoding: .utf8)
            #expect(source != nil, "\(page.lastPathComponent) has Swift blocks and no \(file.lastPathComponent): run Scripts/doc-examples.py (make test does)")
            guard let source else { continue }
            let declared = source.contains("func _docExample_\(String(name))(")
            #expect(declared, "\(file.lastPathComponent) declares no function for its page")
            let current = source.contains("// source-fnv1a: \(Self.fnv1a(data))")
            #expect(current, "\(file.lastPathComponent) was generated from an older \(page.lastPathComponent): run Scripts/doc-examples.py (make test does)")
            checked += 1
        }
        #expect(checked > 0)
    }

    /// The fixture the fragments assume is a valid model that saves.
    @Test func fixtureSaves() throws {
        let context = try DocFixture.context()
        let engineering = Department(context: context)
        engineering.name = "Engineering"
        let ada = Employee(context: context)
        ada.firstName = "Ada"
        ada.lastName = "Lovelace"
        ada.department = engineering
        let week = Timesheet(context: context)
        week.week = 1
        week.hours = 40
        week.employee = ada
        try context.save()
        #expect(try context.count(for: FetchRequest<Employee>()) == 1)
        #expect(ada.salary == 50_000)
    }
}
