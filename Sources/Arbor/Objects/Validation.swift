import Foundation

/// The model's validation rules, applied to values and objects. Each failure is an
/// ``ArborError`` with Core Data's code, naming the object, the key and the rule.
enum Validation {
    /// Checks an attribute value (nil: none) against its attribute's rules.
    static func check(_ value: AttributeValue?, attribute: AttributeDescription, object: ManagedObject) throws {
        try check(value, attribute: attribute, entity: object.entity.name, objectID: object.objectID)
    }

    /// Checks an attribute value of the object `objectID` of `entity` (a stored row's, which
    /// a migration checks without making the object).
    static func check(_ value: AttributeValue?, attribute: AttributeDescription, entity: String, objectID: ManagedObjectID?) throws {
        // The message is made only on failure (checks run for every attribute of every saved object).
        func failure(_ code: ArborError.Code, _ rule: String) -> ArborError {
            ArborError(code, "\(entity).\(attribute.name) \(rule)", entity: entity, key: attribute.name,
                       value: value.map(\.description), objectID: objectID)
        }
        guard let value else {
            if !attribute.isOptional { throw failure(.validationMissingMandatoryProperty, "is required but has no value") }
            return
        }
        let isDate = attribute.type.kind == .date
        if let minimum = attribute.minimum, let order = value.compare(minimum), order < 0 {
            throw failure(isDate ? .validationDateTooSoon : .validationNumberTooSmall, "is \(value), below the minimum \(minimum)")
        }
        if let maximum = attribute.maximum, let order = value.compare(maximum), order > 0 {
            throw failure(isDate ? .validationDateTooLate : .validationNumberTooLarge, "is \(value), above the maximum \(maximum)")
        }
        // A string's length counts its characters (grapheme clusters): only when a rule needs it.
        if attribute.minimumLength != nil || attribute.maximumLength != nil, let length = value.length {
            if let minimum = attribute.minimumLength, length < minimum {
                throw failure(.validationStringTooShort, "is \(length) long, shorter than the minimum \(minimum)")
            }
            if let maximum = attribute.maximumLength, length > maximum {
                throw failure(.validationStringTooLong, "is \(length) long, longer than the maximum \(maximum)")
            }
        }
        if let regex = attribute.regex, case .string(let string) = value, (try? regex.wholeMatch(in: string)) == nil {
            throw failure(.validationStringPatternMatching, "is \(value), which does not match the pattern \(attribute.pattern ?? "")")
        }
    }

    /// The value rules of `attribute` (minimum, maximum, length, pattern) in words, nil when it
    /// has none: what a store records of them (``ModelSchema``), so that a migration checks
    /// existing values against rules that changed.
    static func rulesDescription(_ attribute: AttributeDescription) -> String? {
        var rules: [String] = []
        if let minimum = attribute.minimum { rules.append("minimum \(minimum)") }
        if let maximum = attribute.maximum { rules.append("maximum \(maximum)") }
        if let minimum = attribute.minimumLength { rules.append("length ≥ \(minimum)") }
        if let maximum = attribute.maximumLength { rules.append("length ≤ \(maximum)") }
        if let pattern = attribute.pattern { rules.append("pattern \(pattern)") }
        return rules.isEmpty ? nil : rules.joined(separator: ", ")
    }

    /// Whether `attribute` has a rule ``check(_:attribute:object:)`` applies (a save checks only
    /// those attributes).
    static func hasRules(_ attribute: AttributeDescription) -> Bool {
        !attribute.isOptional || attribute.minimum != nil || attribute.maximum != nil
            || attribute.minimumLength != nil || attribute.maximumLength != nil || attribute.regex != nil
    }

    /// Checks a relationship's size (to-one: 0 or 1) against its rules.
    static func check(count: Int, relationship: RelationshipDescription, object: ManagedObject) throws {
        func failure(_ code: ArborError.Code, _ rule: String) -> ArborError {
            ArborError(code, "\(object.entity.name).\(relationship.name) \(rule)", entity: object.entity.name, key: relationship.name, value: "\(count) objects",
                       objectID: object.objectID)
        }
        if !relationship.isOptional && count == 0 {
            throw failure(.validationMissingMandatoryProperty, "is required but \(relationship.isToMany ? "is empty" : "has no object")")
        }
        if relationship.isToMany {
            if relationship.minimumCount > 0 && count < relationship.minimumCount && !(relationship.isOptional && count == 0) {
                throw failure(.validationRelationshipLacksMinimumCount, "holds \(count) objects, fewer than the minimum \(relationship.minimumCount)")
            }
            if relationship.maximumCount > 0 && count > relationship.maximumCount {
                throw failure(.validationRelationshipExceedsMaximumCount, "holds \(count) objects, more than the maximum \(relationship.maximumCount)")
            }
        }
    }

    /// Whether `relationship` has a rule ``check(count:relationship:object:)`` applies.
    static func hasRules(_ relationship: RelationshipDescription) -> Bool {
        !relationship.isOptional || (relationship.isToMany && (relationship.minimumCount > 0 || relationship.maximumCount > 0))
    }

    /// Every property rule `object` breaks (its persistent and transient attributes, its
    /// relationships).
    static func propertyErrors(of object: ManagedObject) -> [ArborError] {
        // Values a typed property refused come first: they were never set, so the rules below
        // see the value before them.
        var errors: [ArborError] = object.refusedValues.map { $0.sorted { $0.key < $1.key }.map(\.value) } ?? []
        let entity = object.entity
        // Only properties with a rule can fail (most attributes of most models have none).
        let attributes = entity.validatedAttributes
        for index in 0..<attributes.count {
            let (attribute, slot) = attributes[index]
            let value: AttributeValue?
            if case .attribute(let stored)? = object.values[slot: slot] { value = stored } else { value = nil }
            do { try check(value, attribute: attribute, object: object) } catch let error as ArborError { errors.append(error) } catch {}
        }
        for (relationship, slot) in entity.validatedRelationships {
            let count = object.unloadedRelationships.contains(relationship.name) ? -1 : (object.values[slot: slot]?.objectIDs.count ?? 0)
            guard count >= 0 else { continue }  // not loaded: unchanged since it was saved valid
            do { try check(count: count, relationship: relationship, object: object) } catch let error as ArborError { errors.append(error) } catch {}
        }
        return errors
    }

    /// The deny rules a deleted `object` breaks: relationships with the deny rule that still
    /// point at objects not being deleted themselves.
    static func denyErrors(of object: ManagedObject) -> [ArborError] {
        var errors: [ArborError] = []
        for relationship in object.entity.relationships where relationship.deleteRule == .deny {
            let ids = object.values[relationship.name]?.objectIDs ?? []
            let denying = ids.filter { id in object.managedObjectContext?.registeredObject(for: id)?.isDeleted != true }
            guard !denying.isEmpty else { continue }
            errors.append(denial(entity: object.entity, relationship: relationship, of: object.objectID, holding: Array(denying)))
        }
        return errors
    }

    /// The error of a deny rule: `relationship` of `entity` still holds `denying`, so the object
    /// `id` cannot be deleted (a context's validation and a batch delete both throw it).
    static func denial(entity: EntityDescription, relationship: RelationshipDescription, of id: ManagedObjectID,
                       holding denying: [ManagedObjectID]) -> ArborError {
        let named = ArborError.listing(denying.map(\.description), of: denying.count, noun: "object")
        return ArborError(.validationRelationshipDeniedDelete, "\(entity.name).\(relationship.name) denies the deletion of \(id) while it holds \(named)",
                          entity: entity.name, key: relationship.name, value: named, objectID: id)
    }
}
