import Foundation

/// One change of a ``FetchedResultsController``'s objects (Core Data's
/// `NSFetchedResultsChangeType` with its index paths).
public struct FetchedResultsChange: Sendable, Hashable {
    /// What happened to the object in the results.
    public enum Kind: Sendable, Hashable {
        /// It joined the results, at ``FetchedResultsChange/newIndexPath``.
        case insert
        /// It left the results, from ``FetchedResultsChange/indexPath``.
        case delete
        /// It moved from ``FetchedResultsChange/indexPath`` to ``FetchedResultsChange/newIndexPath``.
        case move
        /// It changed in place, at ``FetchedResultsChange/indexPath``.
        case update
    }

    /// What happened.
    public let kind: Kind
    /// The object.
    public let objectID: ManagedObjectID
    /// Where it was (deletes, moves, updates).
    public let indexPath: IndexPath?
    /// Where it is now (inserts, moves).
    public let newIndexPath: IndexPath?
}

/// One change of a ``FetchedResultsController``'s sections.
public struct FetchedResultsSectionChange: Sendable, Hashable {
    /// Whether the section appeared or went.
    public let isInsertion: Bool
    /// Its index (when it appeared: its new one; when it went: its old one).
    public let sectionIndex: Int
    /// Its name.
    public let name: String
}

/// The changes one round of a ``FetchedResultsController`` made to its results, in the order
/// made: each index path is one in the results as they were when that change applied (apply
/// them one after the other; Core Data's delegate reports a batch instead).
public struct FetchedResultsChanges: Sendable, Hashable {
    /// Sections that appeared or went.
    public var sections: [FetchedResultsSectionChange] = []
    /// Objects that joined, left, moved or changed.
    public var objects: [FetchedResultsChange] = []
    /// The results were fetched again as a whole (the context was reset): read the sections
    /// afresh; ``sections`` and ``objects`` say nothing.
    public var reloaded = false

    /// Whether nothing changed.
    public var isEmpty: Bool { sections.isEmpty && objects.isEmpty && !reloaded }
}

/// Told of a ``FetchedResultsController``'s changes (Core Data's
/// `NSFetchedResultsControllerDelegate`, its calls folded into one).
///
/// The controller holds its delegate weakly (``FetchedResultsController/delegate``): keep the
/// delegate alive yourself.
public protocol FetchedResultsControllerDelegate: AnyObject {
    /// The controller's results changed as `changes` says: called once per round of the context
    /// that changed them (the end of an event, a save, a merge), on the context's queue, when the
    /// controller's sections already show the round.
    func controllerDidChangeContent(_ changes: FetchedResultsChanges)
}

/// A fetch request's results kept up to date with the context's changes — its own, and every
/// merge of other contexts' saves, batch requests and other processes' changes — in sections
/// (Core Data's `NSFetchedResultsController`; docs/fetched-results.md).
///
/// Changes are applied one object at a time where they land, found by binary search in the
/// request's order: the cost of a change does not depend on how many objects the results hold
/// (no refetch). Use it on the context's queue.
///
/// ```swift
/// var request = FetchRequest<Employee>(entityName: "Employee")
/// request.sortDescriptors = [ObjectSortDescriptor(key: "department.name"), ObjectSortDescriptor(key: "lastName")]
/// let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "department.name")
/// try controller.performFetch()
/// for await changes in controller.changes { apply(changes) }
/// ```
public final class FetchedResultsController<Result: ManagedObject>: @unchecked Sendable {
    /// A section of the results.
    public struct Section {
        /// Its name: the description of the objects' section key value ("" for nil).
        public let name: String
        /// Its objects, in the request's order.
        public fileprivate(set) var objects: [Result]
        /// How many objects it holds.
        public var numberOfObjects: Int { objects.count }
    }

    /// The request (its predicate and order; every object it matches is in the results).
    public let fetchRequest: FetchRequest<Result>
    /// The context.
    public let managedObjectContext: ManagedObjectContext
    /// The key path whose value names each object's section (nil: one section). The request's
    /// first sort descriptor must order by it.
    public let sectionNameKeyPath: String?
    /// Told of each round of changes.
    public weak var delegate: (any FetchedResultsControllerDelegate)?
    /// The sections, in order (one when there is no ``sectionNameKeyPath`` and any object).
    public private(set) var sections: [Section] = []

    /// Where each object is placed: its section's name and its sort values when it was placed.
    private var placed: [ObjectIdentifier: (section: String, keys: [Operand])] = [:]
    /// The objects of the results by ID (rebuilt when an ID is missing: a save gives new objects
    /// their permanent IDs), for objects the context no longer holds (deleted by a merge).
    private var byID: [ManagedObjectID: Result] = [:]
    /// Whether ``byID`` was rebuilt in this round of changes (at most once a round).
    private var rebuilt = false
    private let evaluator = PredicateEvaluator()
    private let sortPaths: [ArraySlice<String>]
    private let entity: EntityDescription?
    private var observer: (any NSObjectProtocol)?
    private var continuations: [UUID: AsyncStream<FetchedResultsChanges>.Continuation] = [:]
    private let lock = NSLock()

    /// A controller of `fetchRequest`'s results in `context`, in sections by `sectionNameKeyPath`.
    public init(fetchRequest: FetchRequest<Result>, managedObjectContext context: ManagedObjectContext, sectionNameKeyPath: String? = nil) {
        self.fetchRequest = fetchRequest
        managedObjectContext = context
        self.sectionNameKeyPath = sectionNameKeyPath
        sortPaths = fetchRequest.sortDescriptors.map { $0.keys[...] }
        entity = context.persistentStoreCoordinator?.managedObjectModel.entity(named: fetchRequest.entityName)
    }

    deinit {
        if let observer { NotificationCenter.default.removeObserver(observer) }
        lock.withLock { for continuation in continuations.values { continuation.finish() } }
    }

    /// Every object, section after section.
    public var fetchedObjects: [Result] { sections.flatMap(\.objects) }

    /// The object at `indexPath` (section, item).
    public func object(at indexPath: IndexPath) -> Result {
        sections[indexPath[0]].objects[indexPath[1]]
    }

    /// Where `object` is in the results (nil: not there).
    public func indexPath(forObject object: Result) -> IndexPath? {
        guard let place = placed[ObjectIdentifier(object)], let section = sectionIndex(of: place.keys),
              let item = position(of: object, keys: place.keys, in: sections[section].objects) else { return nil }
        return IndexPath(indexes: [section, item])
    }

    /// The results' changes as they happen, each round once, from now on (an `AsyncSequence`).
    public var changes: AsyncStream<FetchedResultsChanges> {
        AsyncStream { continuation in
            let id = UUID()
            lock.withLock { continuations[id] = continuation }
            continuation.onTermination = { [weak self] _ in self?.lock.withLock { _ = self?.continuations.removeValue(forKey: id) } }
        }
    }

    /// Fetches the results and starts following the context's changes.
    ///
    /// - Throws: ``ArborError/Code/invalidFetchRequest`` for a request with a limit or an offset,
    ///   or whose first sort descriptor is not the section key path; what the fetch throws.
    public func performFetch() throws {
        managedObjectContext.checkQueue()
        guard fetchRequest.fetchLimit == 0, fetchRequest.fetchOffset == 0 else {
            throw ArborError(.invalidFetchRequest, "a fetched-results controller keeps every object its request matches: it takes no limit or offset",
                             entity: fetchRequest.entityName)
        }
        if let sectionNameKeyPath, fetchRequest.sortDescriptors.first?.key != sectionNameKeyPath {
            throw ArborError(.invalidFetchRequest, "the first sort descriptor of a sectioned controller must order by its section key path \(sectionNameKeyPath)",
                             entity: fetchRequest.entityName)
        }
        sections = []
        placed = [:]
        // In the controller's own total order (ties broken by object), which binary searches follow.
        var keyed: [(Result, String, [Operand])] = []
        for object in try managedObjectContext.fetch(fetchRequest) {
            let (name, keys) = try key(of: object)
            keyed.append((object, name, keys))
        }
        keyed.sort { order($0.2, $1.2) < 0 }
        for (object, name, keys) in keyed {
            placed[ObjectIdentifier(object)] = (name, keys)
            if let last = sections.last, sameSection(last, keys) {
                sections[sections.count - 1].objects.append(object)
            } else {
                sections.append(Section(name: name, objects: [object]))
            }
        }
        if observer == nil {
            observer = NotificationCenter.default.addObserver(forName: ManagedObjectContext.didChangeObjectsNotification, object: managedObjectContext,
                                                              queue: nil) { [weak self] notification in
                guard let change = ContextChange(notification) else { return }
                self?.apply(change)
            }
        }
    }

    /// An object's section name and sort values (the object's identity, last, breaks ties: it
    /// stays when a save gives a new object its permanent ID).
    private func key(of object: Result) throws -> (String, [Operand]) {
        let subject = Operand.object(object)
        var keys = try sortPaths.map { try evaluator.value(of: $0, on: subject) }
        keys.append(.int(Int64(Int(bitPattern: ObjectIdentifier(object)))))
        var name = ""
        if let sectionNameKeyPath, let value = try object.value(forKeyPath: sectionNameKeyPath) { name = "\(value)" }
        return (name, keys)
    }

    /// Whether sort values `keys` belong in `section`: sections are runs of the first sort
    /// value (the section key path's) that the first sort descriptor finds equal — not of the
    /// names' text, which values it finds equal may spell differently ("Sales", "sales").
    private func sameSection(_ section: Section, _ keys: [Operand]) -> Bool {
        guard sectionNameKeyPath != nil, let first = fetchRequest.sortDescriptors.first else { return true }
        guard let head = section.objects.first, let headKeys = placed[ObjectIdentifier(head)]?.keys else { return false }
        return first.order(headKeys[0], keys[0]) == 0
    }

    /// The section that sort values `keys` belong in, if there is one.
    private func sectionIndex(of keys: [Operand]) -> Int? {
        sections.firstIndex { sameSection($0, keys) }
    }

    /// The order of two objects' sort values.
    private func order(_ a: [Operand], _ b: [Operand]) -> Int {
        for (index, descriptor) in fetchRequest.sortDescriptors.enumerated() {
            let order = descriptor.order(a[index], b[index])
            if order != 0 { return order }
        }
        return ObjectSortDescriptor.totalOrder(a[a.count - 1], b[b.count - 1], [])
    }

    /// The index at which sort values `keys` belong in `objects` (the first not before them).
    private func insertionIndex(of keys: [Operand], in objects: [Result]) -> Int {
        var low = 0, high = objects.count
        while low < high {
            let middle = (low + high) / 2
            if let placed = placed[ObjectIdentifier(objects[middle])], order(placed.keys, keys) < 0 { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Where `object`, placed with `keys`, is in `objects`.
    private func position(of object: Result, keys: [Operand], in objects: [Result]) -> Int? {
        let index = insertionIndex(of: keys, in: objects)
        return index < objects.count && objects[index] === object ? index : nil
    }

    /// Whether `object` belongs in the results.
    private func matches(_ object: ManagedObject) -> Bool {
        guard !object.isDeleted, object.managedObjectContext === managedObjectContext else { return false }
        if let entity {
            guard fetchRequest.includesSubentities ? object.entity.isKind(of: entity) : object.entity === entity else { return false }
        }
        guard let predicate = fetchRequest.predicate else { return true }
        return (try? evaluator.evaluate(predicate, on: .object(object))) ?? false
    }

    /// Applies a change of the context to the results, one object at a time, and reports it.
    private func apply(_ change: ContextChange) {
        guard change.kind == .objectsDidChange else { return }
        if change.invalidatedAllObjects {
            sections = []
            placed = [:]
            do {
                try performFetch()
            } catch {
                managedObjectContext.persistentStoreCoordinator?.logger.error("a fetched-results controller could not fetch its results again after a reset; it holds none",
                                                                            metadata: ["arbor.error": "\(error)"])
            }
            var reloaded = FetchedResultsChanges()
            reloaded.reloaded = true
            return report(reloaded)
        }
        var changes = FetchedResultsChanges()
        rebuilt = false
        let touched = change.insertedObjectIDs.union(change.updatedObjectIDs).union(change.deletedObjectIDs)
            .union(change.refreshedObjectIDs).union(change.invalidatedObjectIDs)
        // In a fixed order, so that a round's changes do not depend on hashing.
        for id in touched.sorted(by: { ($0.entityName, $0.key) < ($1.entityName, $1.key) }) {
            let object = managedObjectContext.registeredObject(for: id) ?? placedObject(id)
            // Where it was.
            var old: (section: Int, item: Int)?
            if let object = object as? Result, let place = placed[ObjectIdentifier(object)],
               let section = sectionIndex(of: place.keys),
               let item = position(of: object, keys: place.keys, in: sections[section].objects) {
                old = (section, item)
            }
            // Where it belongs now.
            var new: (name: String, keys: [Operand])?
            if let object = object as? Result, matches(object), let key = try? key(of: object) { new = key }
            guard let object = object as? Result else { continue }
            switch (old, new) {
            case (nil, nil):
                continue
            case let (old?, nil):
                remove(object, at: old, into: &changes)
                changes.objects.append(FetchedResultsChange(kind: .delete, objectID: object.objectID, indexPath: IndexPath(indexes: [old.section, old.item]), newIndexPath: nil))
            case let (nil, new?):
                let at = insert(object, new, into: &changes)
                changes.objects.append(FetchedResultsChange(kind: .insert, objectID: object.objectID, indexPath: nil, newIndexPath: at))
            case let (old?, new?):
                let place = placed[ObjectIdentifier(object)]!
                if order(place.keys, new.keys) == 0 {
                    placed[ObjectIdentifier(object)] = (new.name, new.keys)
                    changes.objects.append(FetchedResultsChange(kind: .update, objectID: object.objectID, indexPath: IndexPath(indexes: [old.section, old.item]), newIndexPath: nil))
                } else {
                    remove(object, at: old, into: &changes)
                    let at = insert(object, new, into: &changes)
                    changes.objects.append(FetchedResultsChange(kind: .move, objectID: object.objectID, indexPath: IndexPath(indexes: [old.section, old.item]), newIndexPath: at))
                }
            }
        }
        if !changes.isEmpty { report(changes) }
    }

    /// The object of the results with `id`, if any.
    private func placedObject(_ id: ManagedObjectID) -> Result? {
        if let known = byID[id], known.objectID == id { return known }
        guard !rebuilt else { return nil }
        rebuilt = true
        byID = Dictionary(fetchedObjects.map { ($0.objectID, $0) }, uniquingKeysWith: { first, _ in first })
        return byID[id]
    }

    private func remove(_ object: Result, at place: (section: Int, item: Int), into changes: inout FetchedResultsChanges) {
        sections[place.section].objects.remove(at: place.item)
        placed[ObjectIdentifier(object)] = nil
        if sections[place.section].objects.isEmpty {
            changes.sections.append(FetchedResultsSectionChange(isInsertion: false, sectionIndex: place.section, name: sections[place.section].name))
            sections.remove(at: place.section)
        }
    }

    private func insert(_ object: Result, _ new: (name: String, keys: [Operand]), into changes: inout FetchedResultsChanges) -> IndexPath {
        placed[ObjectIdentifier(object)] = (new.name, new.keys)
        let section: Int
        if let existing = sectionIndex(of: new.keys) {
            section = existing
        } else {
            // Sections follow the first sort descriptor (on the section key path): the new one goes
            // before the first whose objects' first sort value comes after its own.
            var index = sections.count
            if let first = fetchRequest.sortDescriptors.first {
                for (i, other) in sections.enumerated() {
                    if let head = other.objects.first, let keys = placed[ObjectIdentifier(head)]?.keys, first.order(new.keys[0], keys[0]) < 0 {
                        index = i
                        break
                    }
                }
            }
            sections.insert(Section(name: new.name, objects: []), at: index)
            changes.sections.append(FetchedResultsSectionChange(isInsertion: true, sectionIndex: index, name: new.name))
            section = index
        }
        let item = insertionIndex(of: new.keys, in: sections[section].objects)
        sections[section].objects.insert(object, at: item)
        return IndexPath(indexes: [section, item])
    }

    private func report(_ changes: FetchedResultsChanges) {
        delegate?.controllerDidChangeContent(changes)
        let listeners = lock.withLock { Array(continuations.values) }
        for continuation in listeners { continuation.yield(changes) }
    }
}
