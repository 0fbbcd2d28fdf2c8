import Foundation

/// A key path resolved against the model: the relationships it goes through, and what its last
/// key names (or where and why the walk stopped).
///
/// The one walker of key paths over entity descriptions. The logical plan (checking predicates
/// and sort keys), the join classifier, the in-memory reasons, the store's grouping and the value
/// decoder each ask it, and derive their rule from its hops and its end; none follows
/// `relationshipsByName` from key to key itself (a check in `make test` holds this). Objects are
/// walked by ``KeyPathEvaluator``, which reads values, not descriptions.
struct ModelKeyPath {
    /// What the walk ended at.
    enum End {
        /// The last key is an attribute.
        case attribute(AttributeDescription)
        /// The last key is a relationship.
        case relationship(RelationshipDescription)
        /// A collection operator (`@count`, `@sum`…) at `offset`; the keys after it are not walked.
        case collectionOperator(String, offset: Int)
        /// The entity reached (``ModelKeyPath/lastEntity``) has no property `key`, at `offset`.
        case unknownKey(String, offset: Int)
        /// `key`, at `offset`, follows the attribute `attribute`.
        case pastAttribute(AttributeDescription, key: String, offset: Int)
    }

    /// The relationships gone through, in order (the last key's, when it is one, is the end's).
    let hops: [RelationshipDescription]
    /// What the walk ended at.
    let end: End
    /// The entity whose property the last key walked names: the entity itself without hops,
    /// else the last hop's destination.
    let lastEntity: EntityDescription

    /// Walks `keys` from `entity`, one key at a time, stopping at a collection operator, an
    /// unknown key or a key after an attribute.
    init(_ keys: some Collection<String>, from entity: EntityDescription) {
        var hops: [RelationshipDescription] = []
        var current = entity
        var end: End?
        let count = keys.count
        for (offset, key) in keys.enumerated() {
            let last = offset == count - 1
            if key.utf8.first == UInt8(ascii: "@") {
                end = .collectionOperator(key, offset: offset)
            } else if let attribute = current.attributesByName[key] {
                if last {
                    end = .attribute(attribute)
                } else {
                    let next = keys.dropFirst(offset + 1).first ?? ""
                    end = .pastAttribute(attribute, key: next, offset: offset + 1)
                }
            } else if let relationship = current.relationshipsByName[key], let destination = relationship.destinationEntity {
                if last {
                    end = .relationship(relationship)
                } else {
                    hops.append(relationship)
                    current = destination
                    continue
                }
            } else {
                end = .unknownKey(key, offset: offset)
            }
            break
        }
        self.hops = hops
        self.end = end ?? .unknownKey("", offset: 0)
        lastEntity = current
    }

    /// Whether every hop is a to-one relationship.
    var throughToOne: Bool { !hops.contains(where: \.isToMany) }

    /// The attribute the key path ends at, if it ends at one.
    var attribute: AttributeDescription? {
        if case .attribute(let attribute) = end { attribute } else { nil }
    }

    /// The relationship the key path ends at, if it ends at one.
    var relationship: RelationshipDescription? {
        if case .relationship(let relationship) = end { relationship } else { nil }
    }

    /// Whether the key path names what a row holds at its end: a stored attribute or a to-one
    /// relationship (its foreign key).
    var endsAtStoredValue: Bool {
        switch end {
        case .attribute(let attribute): !attribute.isTransient
        case .relationship(let relationship): !relationship.isToMany
        default: false
        }
    }

    /// Whether rows answer the key path: through to-one relationships to a stored attribute or a
    /// to-one relationship (a sort key, a group-by key, a value a store reads by joins).
    var readsRows: Bool { throughToOne && endsAtStoredValue }

    /// The entities the hops lead to, each with its sub-entities: whose rows a walk reads beyond
    /// the first entity's.
    var reachedEntities: [EntityDescription] {
        hops.flatMap { $0.destinationEntity?.selfAndDescendants ?? [] }
    }
}
