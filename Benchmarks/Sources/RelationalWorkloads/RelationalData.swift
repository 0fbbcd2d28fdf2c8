import ArborTestSupport
import Foundation

/// The relational workload's data (issue 26, item 9), the same for both engines: departments,
/// employees (each in a department, most with a manager, each with three timesheets and on one or
/// two projects), projects (each for a client) and clients (each in a country).
///
/// At scale 1: 1,000 departments, 100,000 employees, 300,000 timesheets, 2,000 projects and 200
/// clients — 403,200 objects, and about 200,000 employee–project links. Every figure is made
/// from the object's number by a hash, so both engines (in their own processes) store the same
/// values, and every query's answer can be compared.
public struct RelationalShape: Sendable, Codable {
    /// The fraction of the full size (1 for 100,000 employees).
    public let scale: Double
    public let departments: Int
    public let employees: Int
    public let projects: Int
    public let clients: Int
    /// Timesheets per employee.
    public static let timesheetsPerEmployee = 3

    /// The shape at `scale` (every count at least 1).
    public init(scale: Double) {
        self.scale = scale
        departments = max(1, Int((1_000 * scale).rounded()))
        employees = max(1, Int((100_000 * scale).rounded()))
        projects = max(1, Int((2_000 * scale).rounded()))
        clients = max(1, Int((200 * scale).rounded()))
    }

    /// Timesheets in all.
    public var timesheets: Int { employees * Self.timesheetsPerEmployee }
    /// Objects in all (what the import saves).
    public var objects: Int { departments + employees + timesheets + projects + clients }

    // MARK: Departments

    /// Department `d`'s name: `Department 0042`. Not unique by constraint, unique in the data.
    public func departmentName(_ d: Int) -> String {
        let digits = String(d)
        return "Department " + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// The number in a department's name (42 for `Department 0042`): checksums weigh each
    /// department's figure by it, so a figure given to the wrong department shows.
    public static func departmentNumber(_ name: String) -> Int64 {
        Int64(name.split(separator: " ").last.flatMap { Int($0) } ?? -1)
    }

    // MARK: Employees

    /// Employee `i`'s department (a hash: departments hold about `employees / departments`
    /// employees each, not exactly as many, so `employees.@count > n` splits them).
    public func department(ofEmployee i: Int) -> Int { Int(hash(i, 1) % UInt64(departments)) }

    /// Employee `i`'s manager: employee `(i - 1) / 10`, in another department as a rule (none for
    /// employee 0). Managers come before their reports, so either engine can insert in order.
    public func manager(ofEmployee i: Int) -> Int? { i == 0 ? nil : (i - 1) / 10 }

    /// Employee `i`'s first name.
    public func firstName(ofEmployee i: Int) -> String { Self.firstNames[Int(hash(i, 2) % UInt64(Self.firstNames.count))] }

    /// Employee `i`'s last name: two syllables, the first capitalized (`Kamü`, `Lésa`). Letters
    /// with diacritics are only ever lower case, and first letters are ASCII, so SQLite's LIKE
    /// (which folds ASCII only) and Arbor's `[c]` agree on every name.
    public func lastName(ofEmployee i: Int) -> String {
        let (a, b) = lastNameSyllables(i)
        return Self.syllables[a].prefix(1).uppercased() + Self.syllables[a].dropFirst() + Self.syllables[b]
    }

    /// Employee `i`'s email, unique: `ada.kamu.17@example.com` (ASCII, lower case).
    public func email(ofEmployee i: Int) -> String {
        let (a, b) = lastNameSyllables(i)
        return "\(firstName(ofEmployee: i).lowercased()).\(Self.asciiSyllables[a])\(Self.asciiSyllables[b]).\(i)@example.com"
    }

    /// Employee `i`'s salary: 30,000 to 119,999.
    public func salary(ofEmployee i: Int) -> Int64 { 30_000 + Int64(hash(i, 5) % 90_000) }

    /// Employee `i`'s projects: one or two distinct project numbers.
    public func projects(ofEmployee i: Int) -> [Int] {
        let first = i % projects
        let second = (i * 13 + 7) % projects
        return first == second ? [first] : [first, second]
    }

    func lastNameSyllables(_ i: Int) -> (Int, Int) {
        (Int(hash(i, 3) % UInt64(Self.syllables.count)), Int(hash(i, 4) % UInt64(Self.syllables.count)))
    }

    // MARK: Timesheets, projects, clients

    /// Timesheet `k` (0, 1, 2) of employee `i`: its week (0…51) and hours (0…60).
    public func timesheet(_ k: Int, ofEmployee i: Int) -> (week: Int16, hours: Int16) {
        (Int16((i + 17 * k) % 52), Int16(hash(i * 3 + k, 6) % 61))
    }

    /// Project `p`'s name.
    public func projectName(_ p: Int) -> String { "Project \(p)" }
    /// Project `p`'s client.
    public func client(ofProject p: Int) -> Int { p % clients }
    /// Client `c`'s name.
    public func clientName(_ c: Int) -> String { "Client \(c)" }
    /// Client `c`'s country.
    public func country(ofClient c: Int) -> String { Self.countries[(c * 7) % Self.countries.count] }

    // MARK: Word lists

    /// The countries clients are in.
    public static let countries = ["Austria", "Belgium", "Brazil", "Canada", "Chile", "Denmark", "Egypt", "Finland", "France", "Germany",
                                   "Ghana", "India", "Italy", "Japan", "Kenya", "Mexico", "Norway", "Peru", "Spain", "Sweden"]
    static let firstNames = ["Ada", "Alan", "Barbara", "Claude", "Donald", "Edsger", "Frances", "Grace", "John", "Ken", "Leslie",
                             "Margaret", "Niklaus", "Radia", "Robin", "Shafi", "Tony", "Whitfield", "Yukihiro", "Zhang"]
    /// Syllables of last names; some pairs differ only by a diacritic (`mu`, `mü`), so `[cd]`
    /// finds more than `[c]`.
    static let syllables = ["ka", "ro", "mi", "le", "sa", "to", "nu", "be", "da", "fi", "go", "hu", "ja", "lo", "ma",
                            "ne", "pi", "ra", "si", "tu", "va", "mu", "mü", "lé", "rö", "sé", "nå", "bè", "se", "na"]
    /// The syllables without their diacritics (for emails).
    static let asciiSyllables = syllables.map { $0.folding(options: .diacriticInsensitive, locale: nil) }

    func hash(_ i: Int, _ salt: UInt64) -> UInt64 {
        var generator = SplitMix64(seed: UInt64(truncatingIfNeeded: i) &* 0x9E37_79B9_7F4A_7C15 ^ (salt &* 0xD1B5_4A32_D192_ED03))
        return generator.next()
    }
}

/// The parameters of every step's queries, drawn once from a seeded generator: both engines'
/// processes draw the same.
public struct RelationalQueries: Sendable {
    /// Step 2: department names for `department.name == %@`.
    public let departmentNames: [String]
    /// Step 3: department names looked up, then `department == %@`.
    public let lookedUpNames: [String]
    /// Step 4: prefixes of department names (each matches about ten) for
    /// `manager.department.name BEGINSWITH %@`.
    public let managerDepartmentPrefixes: [String]
    /// Step 8: thresholds of `ANY timesheets.hours > %@`.
    public let timesheetHours: [Int64]
    /// Step 8: thresholds of `employees.@count > %@`, around the mean.
    public let employeeCounts: [Int64]
    /// Step 8: `(hours, week)` of `SUBQUERY(timesheets, $t, $t.hours > %@ AND $t.week < %@).@count >= 2`.
    public let subqueryBounds: [(hours: Int64, week: Int64)]
    /// Step 9: countries for `ANY projects.client.country == %@`.
    public let countries: [String]
    /// Step 10: three-letter prefixes of last names in mixed case (only ASCII letters changed),
    /// for `lastName BEGINSWITH[c] %@`.
    public let lastNamePrefixes: [String]
    /// Step 10: three-letter prefixes without diacritics in mixed case, for `BEGINSWITH[cd]`.
    public let foldedLastNamePrefixes: [String]
    /// Step 11: four characters of an email's local part, for `email CONTAINS %@`.
    public let emailNeedles: [String]
    /// Step 11: the same kind, upper case, for `email CONTAINS[c] %@`.
    public let upperCaseEmailNeedles: [String]
    /// Step 12: employees earning less get a 10% raise (about a tenth of them).
    public let raiseBound: Int64 = 39_000
    /// Step 12b: the same raise by one request, for those earning less than this.
    public let batchRaiseBound: Int64 = 36_000
    /// Step 13: the employee each small save changes.
    public let savedEmployees: [Int]
    /// Step 13b: the number of timesheets inserted by one request (half an employee each).
    public let batchInsertedTimesheets: Int
    /// Step 14: the departments deleted (every twentieth: 50 of 1,000).
    public let deletedDepartments: [Int]
    /// Step 14b: the departments deleted by one request (every twentieth of the others: 50).
    public let batchDeletedDepartments: [Int]
    /// Step 16: lower bounds of salaries for value fetches (a third, a half, all of them).
    public let valueBounds: [Int64] = [90_000, 75_000, 30_000]
    /// Step 15: employees read by key after reopening (survivors of step 14).
    public let keyedEmployees: [Int]

    /// The parameters for `shape`: `saves` small saves and `keyed` keyed fetches.
    public init(shape: RelationalShape, saves: Int, keyed: Int) {
        var generator = SplitMix64(seed: 0x2026_0026)
        func below(_ n: Int) -> Int { Int(generator.next() % UInt64(max(1, n))) }
        func mixedCase(_ text: Substring) -> String {
            String(text.map { $0.isASCII && generator.next() % 2 == 0 ? Character($0.uppercased()) : $0 })
        }
        departmentNames = (0..<200).map { _ in shape.departmentName(below(shape.departments)) }
        lookedUpNames = (0..<200).map { _ in shape.departmentName(below(shape.departments)) }
        managerDepartmentPrefixes = (0..<20).map { _ in String(shape.departmentName(below(shape.departments)).dropLast()) }
        timesheetHours = [40, 50, 55, 58, 59]
        let mean = Int64(shape.employees / shape.departments)
        employeeCounts = [mean - 10, mean - 5, mean, mean + 5, mean + 10]
        subqueryBounds = [(30, 26), (40, 40), (20, 10), (50, 52), (10, 30)]
        countries = Array(RelationalShape.countries.prefix(5))
        lastNamePrefixes = (0..<200).map { _ in mixedCase(shape.lastName(ofEmployee: below(shape.employees)).prefix(3)) }
        foldedLastNamePrefixes = (0..<200).map { _ in
            mixedCase(Substring(shape.lastName(ofEmployee: below(shape.employees)).folding(options: .diacriticInsensitive, locale: nil).prefix(3)))
        }
        func needle() -> String {
            let local = Array(shape.email(ofEmployee: below(shape.employees)).split(separator: "@")[0])
            let start = below(local.count - 3)
            return String(local[start..<(start + 4)])
        }
        emailNeedles = (0..<20).map { _ in needle() }
        upperCaseEmailNeedles = (0..<20).map { _ in needle().uppercased() }
        savedEmployees = (0..<saves).map { _ in below(shape.employees) }
        batchInsertedTimesheets = shape.employees / 2
        let deleted = Array(stride(from: 7 % shape.departments, to: shape.departments, by: 20))
        deletedDepartments = deleted
        batchDeletedDepartments = shape.departments < 2 ? [] : Array(stride(from: 13 % shape.departments, to: shape.departments, by: 20)).filter { !deleted.contains($0) }
        let gone = Set(deleted + batchDeletedDepartments)
        let survivors = (0..<shape.employees).filter { !gone.contains(shape.department(ofEmployee: $0)) }
        keyedEmployees = survivors.isEmpty ? [] : (0..<keyed).map { _ in survivors[below(survivors.count)] }
    }
}
