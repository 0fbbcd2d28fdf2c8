import Arbor

/// The relational test model and a way to compare dictionary results, shared by the tests
/// (`JoinTests`, `DifferentialTests`, …) and `Fuzz/Sources/FuzzPlanner`. Unlike the grammar's
/// strings, these need Arbor.
extension RelationalGrammar {
    /// The model ``RelationalGrammar`` describes: divisions, departments, people (employees and
    /// contractors), projects, clients, and a note reached by no relationship.
    public static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Division") {
                Attribute("title", .string)
                Relationship("departments", to: "Department", inverse: "division").toMany()
            }
            Entity("Department") {
                Attribute("name", .string)
                Attribute("budget", .integer64)
                Relationship("division", to: "Division", inverse: "departments")
                Relationship("employees", to: "Person", inverse: "department").toMany()
                Unique("name")
            }
            Entity("Person", abstract: true) {
                Attribute("name", .string)
                Attribute("salary", .integer64).indexed()
                Attribute("rating", .double)
                Relationship("department", to: "Department", inverse: "employees")
                Relationship("manager", to: "Person", inverse: "reports")
                Relationship("reports", to: "Person", inverse: "manager").toMany()
                Relationship("projects", to: "Project", inverse: "members").toMany()
            }
            Entity("Project") {
                Attribute("title", .string)
                Relationship("members", to: "Person", inverse: "projects").toMany()
                Relationship("client", to: "Client", inverse: "projects")
            }
            Entity("Client") {
                Attribute("country", .string)
                Relationship("projects", to: "Project", inverse: "client").toMany()
            }
            Entity("Employee", parent: "Person") {
                Attribute("badge", .integer32)
            }
            Entity("Contractor", parent: "Person") {
                Attribute("agency", .string)
            }
            // Reached by no relationship: an unsaved note makes a context answer dictionary
            // fetches with objects, on the plan the store would follow (DifferentialTests).
            Entity("Note") {
                Attribute("text", .string)
            }
        }
    }

    /// A dictionary as comparable text: keys sorted, each value with its type (IDs as URIs).
    public static func text(_ row: [String: any Sendable]) -> String {
        row.keys.sorted().map { key -> String in
            let value: String = switch row[key] {
            case let id as ManagedObjectID: id.uriRepresentation().absoluteString
            case let other?: "\(type(of: other))(\(other))"
            case nil: "nil"
            }
            return "\(key)=\(value)"
        }.joined(separator: ",")
    }
}
