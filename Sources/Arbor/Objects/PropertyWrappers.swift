import Foundation

/// A typed attribute or to-one relationship of a ``ManagedObject`` subclass, read and written
/// through key-value coding:
///
/// ```swift
/// final class Book: ManagedObject {
///     @Managed("title") var title: String          // a required attribute
///     @Managed("pages") var pages: Int?            // an .integer32 attribute, read as Int
///     @Managed("price") var price: Decimal?
///     @Managed("author") var author: Author?       // a to-one relationship
///     @ManagedSet("loans") var loans: Set<Loan>
///     @ManagedList("chapters") var chapters: [Chapter]
/// }
/// ```
///
/// The key names the model's property. When the model is made, every declaration of a class
/// given to an ``Entity`` is checked against its property (``ManagedObjectModel/init(entities:configurations:)``
/// throws ``ArborError/Code/invalidModel`` naming the class, the Swift property, the declared
/// type and the attribute's type), so a typed read never returns nil for a value that is there:
///
/// - an integer attribute takes `Int` or any signed integer type as wide as the attribute
///   (`Int16`, `Int32`, `Int64`); writes are checked against the attribute's width;
/// - every other attribute takes its own Swift type (`Decimal` for `.decimal`, `Double` for
///   `.double`, …: docs/model.md, "Attribute types");
/// - a non-optional type (`var title: String`) is for a required attribute: where the object
///   holds nil (a new object not yet set) it reads the attribute's default value, or the type's
///   zero value (`0`, `""`, `false`, empty `Data`); `Date`, `UUID`, `URL` and transformable types
///   need a default value to be declared non-optional;
/// - a to-one relationship takes an optional class that the destination entity's objects are.
///
/// Getters cannot throw. A value that cannot be read — the object cannot load it
/// (``ManagedObject/inaccessibility``: its context was reset or has ended), its row is gone and
/// ``ManagedObjectContext/shouldDeleteInaccessibleFaults`` is off, the store failed — reads nil,
/// or the type's zero value, and never in silence: the failure is in
/// ``ManagedObject/accessFailure`` and in the log (`error`, once per object), and builds with
/// Arbor's checks stop the program when the object cannot load. A fault whose row is gone, with
/// ``ManagedObjectContext/shouldDeleteInaccessibleFaults`` on (the default), is a deleted object
/// that reads nil or zero, as in Core Data, with a warning in the log. Ask
/// ``ManagedObject/isInaccessible`` first, or use `value(forKey:)` to get the error.
///
/// Setters cannot throw. A value the model refuses (an integer too large for the attribute, an
/// object of another context, any value for an object that cannot load) is not set: the
/// property keeps its old value, the refusal is in ``ManagedObject/refusal(forKey:)``,
/// observers are told to read the property again, the object counts as changed, and its next
/// ``ManagedObject/validateForInsert()`` or ``ManagedObject/validateForUpdate()`` — and so the
/// next save — fails with the error, naming the object, the key and the value. Setting the
/// property again with an accepted value, or rolling back, clears it. Use
/// `setValue(_:forKey:)` to get the error at once.
@propertyWrapper
public struct Managed<Value>: TypedDeclaration {
    /// The property's key in the model.
    public let key: String

    /// A typed accessor for the property `key`.
    public init(_ key: String) { self.key = key }

    /// Unavailable: the value is reached through the enclosing object.
    @available(*, unavailable, message: "@Managed is only for properties of ManagedObject subclasses")
    public var wrappedValue: Value {
        get { fatalError("@Managed is only for properties of ManagedObject subclasses") }
        set { fatalError("@Managed is only for properties of ManagedObject subclasses") }
    }

    static var wrapper: TypedAccess.Wrapper { .managed }
    static var declaredType: Any.Type { Value.self }

    /// The property of `object` (Swift's enclosing-instance access for property wrappers): read
    /// and converted to `Value` as the model's check guarantees it can be, and written through
    /// `setValue(_:forKey:)`, a refusal recorded (see above).
    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, Managed<Value>>
    ) -> Value {
        get { TypedAccess.read(object, key: object[keyPath: storageKeyPath].key, as: Value.self) }
        set { TypedAccess.write(TypedAccess.flattened(newValue), to: object, key: object[keyPath: storageKeyPath].key) }
    }
}

/// A typed unordered to-many relationship of a ``ManagedObject`` subclass (see ``Managed``):
/// the model checks that the relationship is unordered and that its destination entity's objects
/// are `Element`s.
@propertyWrapper
public struct ManagedSet<Element: ManagedObject>: TypedDeclaration {
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

    static var wrapper: TypedAccess.Wrapper { .set }
    static var declaredType: Any.Type { Element.self }

    /// The property of `object` (Swift's enclosing-instance access for property wrappers): the
    /// getter reads the destinations (none while a fault whose row is gone cannot load them),
    /// the setter writes them through `setValue(_:forKey:)`, a refusal recorded (see ``Managed``).
    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, Set<Element>>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, ManagedSet<Element>>
    ) -> Set<Element> {
        get { Set(TypedAccess.destinations(object, key: object[keyPath: storageKeyPath].key).compactMap { $0 as? Element }) }
        set { TypedAccess.write(Set(newValue.map { $0 as ManagedObject }), to: object, key: object[keyPath: storageKeyPath].key) }
    }
}

/// A typed ordered to-many relationship of a ``ManagedObject`` subclass (see ``Managed``): the
/// model checks that the relationship is ordered and that its destination entity's objects are
/// `Element`s.
@propertyWrapper
public struct ManagedList<Element: ManagedObject>: TypedDeclaration {
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

    static var wrapper: TypedAccess.Wrapper { .list }
    static var declaredType: Any.Type { Element.self }

    /// The property of `object` (Swift's enclosing-instance access for property wrappers): the
    /// getter reads the destinations in order, the setter writes them through
    /// `setValue(_:forKey:)`, a refusal recorded (see ``Managed``).
    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, [Element]>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, ManagedList<Element>>
    ) -> [Element] {
        get { TypedAccess.destinations(object, key: object[keyPath: storageKeyPath].key).compactMap { $0 as? Element } }
        set { TypedAccess.write(newValue.map { $0 as ManagedObject }, to: object, key: object[keyPath: storageKeyPath].key) }
    }
}
