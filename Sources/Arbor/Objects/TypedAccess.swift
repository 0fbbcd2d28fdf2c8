import Foundation

/// How a typed accessor (``Managed``, ``ManagedSet``, ``ManagedList``) meets the property it
/// names: which Swift types may be declared for which property, checked once per class when a
/// model is made (``problem(declaring:through:key:in:)``), and the reads and writes that convert
/// between the declared type and the stored value. The one owner of that rule: the model's check
/// and the accessors both ask it.
///
/// The rule, for `@Managed` (docs/object-graph.md, "Typed subclasses"):
/// - an integer attribute takes any Swift integer type that holds every value of its width
///   (`Int16`, `Int32`, `Int64` or `Int` on `.integer16`; `Int32`, `Int64` or `Int` on
///   `.integer32`; `Int64` or `Int` on `.integer64`); writes are checked against the width;
/// - every other attribute takes its own type exactly (`Decimal` on `.decimal`, `Double` on
///   `.double`, `Float` on `.float`, the transformable's `Codable` type, …);
/// - a to-one relationship takes an optional class that every class of its destination entity
///   (and of the destination's sub-entities) is, or inherits from;
/// - a non-optional type (`var title: String`) needs a required attribute, and reads the
///   attribute's default value — or the type's zero value (0, `""`, `false`, empty `Data`) when
///   there is no default — where the object holds nil (a new object not set yet, a fault whose
///   row is gone); types with no zero value (`Date`, `UUID`, `URL`, transformables) need a
///   default value to be declared non-optional.
///
/// `@ManagedSet` takes an unordered to-many relationship, `@ManagedList` an ordered one, each of
/// an element class every destination class is.
enum TypedAccess {
    /// The property wrapper a declaration uses.
    enum Wrapper: String {
        case managed = "@Managed"
        case set = "@ManagedSet"
        case list = "@ManagedList"
    }

    // MARK: Checking declarations

    /// What is wrong with declaring `declared` (the Swift type of the property, optional or not)
    /// through `wrapper` for the property `key` of `entity`; nil when it fits.
    static func problem(declaring declared: Any.Type, through wrapper: Wrapper, key: String, in entity: EntityDescription) -> String? {
        let optional = (declared as? any OptionalDeclaration.Type)?.wrappedType
        let base = optional ?? declared
        if let attribute = entity.attributesByName[key] {
            guard wrapper == .managed else {
                return "\(entity.name).\(key) is an attribute (\(attribute.type)): declare it with @Managed"
            }
            if let reason = mismatch(base, attribute.type) { return reason }
            if optional == nil {
                if attribute.isOptional {
                    return "\(entity.name).\(key) is optional: declare \(base)? or make the attribute required"
                }
                if attribute.defaultValue == nil && zeroValue(of: attribute.type.kind) == nil {
                    return "\(entity.name).\(key) has no default value, and \(base) no zero value to read while it is nil: declare \(base)? or give the attribute a default value"
                }
            }
            return nil
        }
        guard let relationship = entity.relationshipsByName[key] else {
            return "\(entity.name) has no property \"\(key)\""
        }
        let expected: Wrapper = !relationship.isToMany ? .managed : relationship.isOrdered ? .list : .set
        guard wrapper == expected else {
            let kind = !relationship.isToMany ? "to-one" : relationship.isOrdered ? "ordered to-many" : "unordered to-many"
            return "\(entity.name).\(key) is a \(kind) relationship: declare it with \(expected.rawValue)"
        }
        if wrapper == .managed && optional == nil {
            return "\(entity.name).\(key) is a to-one relationship, nil until it is set: declare it \(base)?"
        }
        guard let element = base as? ManagedObject.Type else {
            return "\(entity.name).\(key) holds \(relationship.destinationEntityName) objects; \(base) is not a ManagedObject class"
        }
        for destination in relationship.destinationEntity?.selfAndDescendants ?? [] where !destination.isAbstract && !isClass(destination.managedObjectClass, base) {
            return "\(entity.name).\(key) holds \(destination.name) objects, whose class \(destination.managedObjectClass) is not a \(element): declare a class they all are, or give \(destination.name) a class inheriting from \(element)"
        }
        return nil
    }

    /// Why `swift` cannot hold every value of attribute type `type` (nil: it can).
    static func mismatch(_ swift: Any.Type, _ type: AttributeType) -> String? {
        let fits: Bool
        switch type.kind {
        case .integer16, .integer32, .integer64:
            let width = type.kind == .integer16 ? 16 : type.kind == .integer32 ? 32 : 64
            guard let integer = swift as? any FixedWidthInteger.Type else {
                return "a \(type) attribute holds integers, not \(swift) values: declare Int or Int\(width)"
            }
            guard integer.isSigned && integer.bitWidth >= width else {
                return "\(swift) cannot hold every value of a \(type) attribute (\(width)-bit signed): declare Int, Int\(width) or a wider signed integer"
            }
            return nil
        case .decimal: fits = swift == Decimal.self
        case .double: fits = swift == Double.self
        case .float: fits = swift == Float.self
        case .string: fits = swift == String.self
        case .boolean: fits = swift == Bool.self
        case .date: fits = swift == Date.self
        case .binaryData: fits = swift == Data.self
        case .uuid: fits = swift == UUID.self
        case .uri: fits = swift == URL.self
        case .transformable: fits = String(reflecting: swift) == type.valueTypeName
        }
        return fits ? nil : "a \(type) attribute holds \(type.valueTypeName) values, not \(swift)"
    }

    /// Whether `candidate` is `required` or a subclass of it. (`required` is an existential
    /// metatype, opened: `T` is the dynamic type, not `ManagedObject`.)
    static func isClass(_ candidate: ManagedObject.Type, _ required: any Any.Type) -> Bool {
        func check<T>(_: T.Type) -> Bool { candidate is T.Type }
        return check(required)
    }

    /// The value a non-optional declaration reads where an attribute of `kind` with no default
    /// holds nil (nil: the type has none).
    static func zeroValue(of kind: AttributeType.Kind) -> AttributeValue? {
        switch kind {
        case .integer16, .integer32, .integer64: .integer(0)
        case .decimal: .decimal(0)
        case .double: .double(0)
        case .float: .float(0)
        case .string: .string("")
        case .boolean: .boolean(false)
        case .binaryData: .data(Data())
        case .date, .uuid, .uri, .transformable: nil
        }
    }

    // MARK: Reading and writing

    /// The value of the attribute or to-one relationship `key` of `object`, as `Value` (the
    /// declared type: optional or not). A value that cannot be read — the object cannot load
    /// it (``ManagedObject/inaccessibility``), its row is gone with
    /// ``ManagedObjectContext/shouldDeleteInaccessibleFaults`` off, the store failed — reads as
    /// nil, or the type's zero value, and the failure is recorded and logged
    /// (``ManagedObject/recordFailedAccess(_:key:writing:)``): never in silence. A fault whose
    /// row is gone, turned into a deleted object, reads nil or zero (as Core Data documents).
    static func read<Value>(_ object: ManagedObject, key: String, as _: Value.Type) -> Value {
        let entity = object.entity
        if let attribute = entity.attributesByName[key] {
            object.checkQueue()
            if let slot = entity.propertyLayout.index[key] { object.observationAccess(slot) }
            var stored: AttributeValue?
            var loaded = true
            if !attribute.isTransient {
                do {
                    try object.fireFault()
                } catch {
                    object.recordFailedAccess(ArborError(reading: error, key: key, of: object), key: key, writing: false)
                    loaded = false
                }
            }
            if loaded, case .attribute(let value)? = object.values[key] { stored = value }
            if let stored, let value = convert(stored, attribute.type, to: Value.self) { return value }
            if let none = nilValue(Value.self) { return none }
            // Non-optional: the default value, else the type's zero value (the model's check
            // let the declaration through only with one of them) — the zero first for a value
            // that could not be read, or whose row is gone.
            let zero = zeroValue(of: attribute.type.kind)
            let placeholders = loaded && !object.rowMissing ? [attribute.defaultValue, zero] : [zero, attribute.defaultValue]
            if let placeholder = placeholders.lazy.compactMap({ $0 }).first, let value = convert(placeholder, attribute.type, to: Value.self) {
                return value
            }
            preconditionFailure(undeclared(Value.self, key: key, object: object))
        }
        do {
            if let destination = try object.value(forKey: key) as? ManagedObject, let value = destination as? Value { return value }
        } catch {
            object.recordFailedAccess(ArborError(reading: error, key: key, of: object), key: key, writing: false)
        }
        if let none = nilValue(Value.self) { return none }
        preconditionFailure(undeclared(Value.self, key: key, object: object))
    }

    /// The destinations of the to-many relationship `key` of `object`; none, recorded and
    /// logged as a read of ``read(_:key:as:)`` is, while they cannot be read.
    static func destinations(_ object: ManagedObject, key: String) -> [ManagedObject] {
        do {
            switch try object.value(forKey: key) {
            case let set as Set<ManagedObject>: return Array(set)
            case let list as [ManagedObject]: return list
            default: return []
            }
        } catch {
            object.recordFailedAccess(ArborError(reading: error, key: key, of: object), key: key, writing: false)
            return []
        }
    }

    /// Sets `key` of `object` to `value` through key-value coding. A value the model refuses is
    /// not set: the refusal is recorded in the object (``ManagedObject/refuse(_:forKey:)``),
    /// and the object's next validation or save fails with it.
    static func write(_ value: Any?, to object: ManagedObject, key: String) {
        do {
            try object.setValue(value, forKey: key)
        } catch let error as ArborError where error.code == .objectInaccessible {
            // Nothing will save it: no context holds the object.
            object.recordFailedAccess(error, key: key, writing: true)
            object.refuse(error, forKey: key)
        } catch let error as ArborError {
            object.refuse(error, forKey: key)
        } catch {
            object.refuse(ArborError(.wrongValueType, "\(object.entity.name).\(key) refused \(String(describing: value)): \(error)",
                                     entity: object.entity.name, key: key, value: String(describing: value), objectID: object.objectID),
                          forKey: key)
        }
    }

    /// `value` with an optional's wrapper taken off (nil for an optional holding nil).
    static func flattened<Value>(_ value: Value) -> Any? {
        if let optional = value as? any OptionalDeclaration { return optional.heldValue }
        return value
    }

    /// `stored` (of attribute type `type`) as a `Value` (or `Value`'s wrapped type).
    static func convert<Value>(_ stored: AttributeValue, _ type: AttributeType, to _: Value.Type) -> Value? {
        let base = (Value.self as? any OptionalDeclaration.Type)?.wrappedType ?? Value.self
        if case .integer(let number) = stored, let integer = base as? any FixedWidthInteger.Type {
            func exact<I: FixedWidthInteger>(_: I.Type) -> Any? { I(exactly: number) }
            return exact(integer).flatMap { $0 as? Value }
        }
        return type.swiftValue(of: stored) as? Value
    }

    /// nil as `Value`, when `Value` is optional.
    static func nilValue<Value>(_: Value.Type) -> Value? {
        guard let optional = Value.self as? any OptionalDeclaration.Type else { return nil }
        return optional.nilOfType as? Value
    }

    /// The message of the one failure left to a typed read: a declaration the model never
    /// checked (an object of this class made for an entity that does not declare the class).
    static func undeclared<Value>(_: Value.Type, key: String, object: ManagedObject) -> String {
        "\(type(of: object)).\(key) is declared \(Value.self), which \(object.entity.name).\(key) cannot give: declare the class on the entity (Entity(\"\(object.entity.name)\", class: \(type(of: object)).self)) so that the model checks its accessors"
    }
}

/// `Optional`, seen from a typed accessor: its wrapped type, and nil.
protocol OptionalDeclaration {
    /// The type an optional of this type wraps.
    static var wrappedType: Any.Type { get }
    /// nil of this type.
    static var nilOfType: Self { get }
    /// The value held, nil when none.
    var heldValue: Any? { get }
}

extension Optional: OptionalDeclaration {
    static var wrappedType: Any.Type { Wrapped.self }
    static var nilOfType: Self { nil }
    var heldValue: Any? { self.map { $0 as Any } }
}

// MARK: Declarations

/// A typed accessor found in a class: its key, wrapper and declared type.
protocol TypedDeclaration {
    /// The property's key in the model.
    var key: String { get }
    /// The wrapper used.
    static var wrapper: TypedAccess.Wrapper { get }
    /// The Swift type declared (optional or not; the element type for to-many wrappers).
    static var declaredType: Any.Type { get }
}

extension TypedAccess {
    /// Every typed accessor the class of `entity` declares (inherited ones included) that does
    /// not fit the entity: one error per accessor, naming the class, the Swift property, the
    /// declared type and the property's type. The class's declarations are read from an
    /// instance made outside any context (its stored properties' initial values run; nothing is
    /// inserted or registered).
    static func declarationErrors(of entity: EntityDescription) -> [ArborError] {
        let objectClass = entity.managedObjectClass
        guard objectClass != ManagedObject.self, !entity.isAbstract else { return [] }
        let instance = objectClass.init(entity: entity, insertInto: nil)
        var errors: [ArborError] = []
        var mirror: Mirror? = Mirror(reflecting: instance)
        while let current = mirror {
            for child in current.children {
                guard let declaration = child.value as? any TypedDeclaration else { continue }
                let wrapper = type(of: declaration).wrapper
                let declared = type(of: declaration).declaredType
                guard let reason = problem(declaring: declared, through: wrapper, key: declaration.key, in: entity) else { continue }
                let property = child.label.map { $0.hasPrefix("_") ? String($0.dropFirst()) : $0 } ?? "?"
                let written = (declared as? any OptionalDeclaration.Type).map { "\($0.wrappedType)?" } ?? "\(declared)"
                let shown = wrapper == .managed ? written : wrapper == .set ? "Set<\(declared)>" : "[\(declared)]"
                let kind = entity.attributesByName[declaration.key].map { "\($0.type)" }
                    ?? entity.relationshipsByName[declaration.key].map { "relationship to \($0.destinationEntityName)" } ?? "no property"
                errors.append(ArborError(.wrongValueType,
                                         "\(current.subjectType).\(property) (\(wrapper.rawValue)(\"\(declaration.key)\") var \(property): \(shown)) does not fit \(entity.name).\(declaration.key) (\(kind)): \(reason)",
                                         entity: entity.name, key: declaration.key, value: shown))
            }
            mirror = current.superclassMirror
        }
        return errors
    }
}

extension ArborError {
    /// A failure of reading `key` of `object` as an ``ArborError`` (one of another kind wrapped).
    init(reading error: any Error, key: String, of object: ManagedObject) {
        if let error = error as? ArborError {
            self = error
        } else {
            self.init(.store, "\(object.objectID).\(key) could not be read: \(error)", entity: object.entity.name, key: key, objectID: object.objectID)
        }
    }
}
