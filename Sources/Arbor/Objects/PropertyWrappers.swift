import Foundation

/// A typed attribute or to-one relationship of a ``ManagedObject`` subclass, read and written
/// through key-value coding:
///
/// ```swift
/// final class Employee: ManagedObject {
///     @Managed("firstName") var firstName: String?
///     @Managed("salary") var salary: Decimal?
///     @Managed("department") var department: Department?
///     @ManagedSet("projects") var projects: Set<Project>
///     @ManagedList("reports") var reports: [Employee]
/// }
/// ```
///
/// The key names the model's property; the Swift type must be the attribute's (`Int16` for
/// `.integer16`, and so on: docs/model.md) or the destination's class. Setting a value the model
/// refuses, or one of another type, is a programming error here (accessors cannot throw); use
/// `setValue(_:forKey:)` to get a typed error instead. Reading a fault whose row is gone gives nil.
@propertyWrapper
public struct Managed<Value> {
    /// The property's key in the model.
    public let key: String

    /// A typed accessor for the property `key`.
    public init(_ key: String) { self.key = key }

    /// Unavailable: the value is reached through the enclosing object.
    @available(*, unavailable, message: "@Managed is only for properties of ManagedObject subclasses")
    public var wrappedValue: Value? {
        get { fatalError("@Managed is only for properties of ManagedObject subclasses") }
        set { fatalError("@Managed is only for properties of ManagedObject subclasses") }
    }

    /// The property of `object` (Swift's enclosing-instance access for property wrappers): the
    /// getter reads it through `value(forKey:)` (nil when that fails or the type differs), the
    /// setter writes it through `setValue(_:forKey:)` and stops on a refused value (see above).
    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, Value?>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, Managed<Value>>
    ) -> Value? {
        get {
            let key = object[keyPath: storageKeyPath].key
            return (try? object.value(forKey: key)).flatMap { $0 as? Value }
        }
        set {
            let key = object[keyPath: storageKeyPath].key
            do {
                try object.setValue(newValue, forKey: key)
            } catch {
                preconditionFailure("\(object.entity.name).\(key) refused \(String(describing: newValue)): \(error)")
            }
        }
    }
}

/// A typed unordered to-many relationship of a ``ManagedObject`` subclass (see ``Managed``).
@propertyWrapper
public struct ManagedSet<Element: ManagedObject> {
    /// The relationship's key in the model.
    public let key: String

    /// A typed accessor for the to-many relationship `key`.
    public init(_ key: String) { self.key = key }

    /// Unavailable: the value is reached through the enclosing object.
    @available(*, unavailable, message: "@ManagedSet is only for properties of ManagedObject subclasses")
    public var wrappedValue: Set<Element> {
        get { fatalError("@ManagedSet is only for properties of ManagedObject subclasses") }
        set { fatalError("@ManagedSet is only for properties of ManagedObject subclasses") }
    }

    /// The property of `object` (Swift's enclosing-instance access for property wrappers): the
    /// getter reads it through `value(forKey:)` (nil when that fails or the type differs), the
    /// setter writes it through `setValue(_:forKey:)` and stops on a refused value (see above).
    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, Set<Element>>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, ManagedSet<Element>>
    ) -> Set<Element> {
        get {
            let key = object[keyPath: storageKeyPath].key
            let objects = (try? object.value(forKey: key)) as? Set<ManagedObject> ?? []
            return Set(objects.compactMap { $0 as? Element })
        }
        set {
            let key = object[keyPath: storageKeyPath].key
            do {
                try object.setValue(Set(newValue.map { $0 as ManagedObject }), forKey: key)
            } catch {
                preconditionFailure("\(object.entity.name).\(key) refused the objects given: \(error)")
            }
        }
    }
}

/// A typed ordered to-many relationship of a ``ManagedObject`` subclass (see ``Managed``).
@propertyWrapper
public struct ManagedList<Element: ManagedObject> {
    /// The relationship's key in the model.
    public let key: String

    /// A typed accessor for the ordered to-many relationship `key`.
    public init(_ key: String) { self.key = key }

    /// Unavailable: the value is reached through the enclosing object.
    @available(*, unavailable, message: "@ManagedList is only for properties of ManagedObject subclasses")
    public var wrappedValue: [Element] {
        get { fatalError("@ManagedList is only for properties of ManagedObject subclasses") }
        set { fatalError("@ManagedList is only for properties of ManagedObject subclasses") }
    }

    /// The property of `object` (Swift's enclosing-instance access for property wrappers): the
    /// getter reads it through `value(forKey:)` (nil when that fails or the type differs), the
    /// setter writes it through `setValue(_:forKey:)` and stops on a refused value (see above).
    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, [Element]>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, ManagedList<Element>>
    ) -> [Element] {
        get {
            let key = object[keyPath: storageKeyPath].key
            let objects = (try? object.value(forKey: key)) as? [ManagedObject] ?? []
            return objects.compactMap { $0 as? Element }
        }
        set {
            let key = object[keyPath: storageKeyPath].key
            do {
                try object.setValue(newValue.map { $0 as ManagedObject }, forKey: key)
            } catch {
                preconditionFailure("\(object.entity.name).\(key) refused the objects given: \(error)")
            }
        }
    }
}
