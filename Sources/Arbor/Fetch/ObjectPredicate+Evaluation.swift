import Foundation

extension ObjectPredicate {
    /// Whether `object` — a managed object, a dictionary of values by key, or a plain value
    /// (for `SELF`) — matches the predicate, with `$variables` taken from `substitutionVariables`.
    ///
    /// - Throws: ``ArborError/Code/unknownKey`` for a key the object does not have;
    ///   ``ArborError/Code/wrongValueType`` for values that cannot be compared (a string ordered
    ///   against a number); ``ArborError/Code/invalidFetchRequest`` for a variable with no value.
    public func evaluate(with object: Any?, substitutionVariables: [String: Any?] = [:]) throws -> Bool {
        let evaluator = PredicateEvaluator(variables: substitutionVariables.mapValues(Operand.from))
        return try evaluator.evaluate(self, on: Operand.from(object))
    }

    /// The predicate with its `$variables` replaced by constants.
    ///
    /// - Throws: ``ArborError/Code/wrongValueType`` for a value no predicate can hold. Variables
    ///   without a value stay as they are.
    public func substituting(_ variables: [String: Any?]) throws -> ObjectPredicate {
        let constants = try variables.mapValues { try PredicateValue.from($0) }
        return map { expression in
            if case .variable(let name) = expression, let value = constants[name] { return .constant(value) }
            return nil
        }
    }

    /// The predicate with expressions replaced where `transform` returns one (applied to every
    /// expression, outermost first; a SUBQUERY's own variable is left alone inside it).
    func map(_ transform: (ObjectExpression) -> ObjectExpression?) -> ObjectPredicate {
        switch self {
        case .constant: self
        case .not(let inner): .not(inner.map(transform))
        case .and(let terms): .and(terms.map { $0.map(transform) })
        case .or(let terms): .or(terms.map { $0.map(transform) })
        case .comparison(let comparison):
            .comparison(ComparisonPredicate(comparison.left.map(transform), comparison.operator, comparison.right.map(transform),
                                            modifier: comparison.modifier, options: comparison.options))
        }
    }
}

extension ObjectExpression {
    func map(_ transform: (ObjectExpression) -> ObjectExpression?) -> ObjectExpression {
        if let replaced = transform(self) { return replaced }
        switch self {
        case .constant, .evaluatedObject, .keyPath, .variable: return self
        case .keyPathOn(let base, let keys): return .keyPathOn(base.map(transform), keys)
        case .aggregate(let elements): return PredicateParser.aggregate(elements.map { $0.map(transform) })
        case .arithmetic(let op, let a, let b): return .arithmetic(op, a.map(transform), b.map(transform))
        case .subquery(let collection, let variable, let predicate):
            return .subquery(collection.map(transform), variable: variable, predicate.map { expression in
                if case .variable(variable) = expression { return expression }
                return transform(expression)
            })
        }
    }

    /// The value of the expression for `object` (a managed object, a dictionary, a plain value).
    ///
    /// - Throws: as ``ObjectPredicate/evaluate(with:substitutionVariables:)``.
    public func expressionValue(with object: Any?, substitutionVariables: [String: Any?] = [:]) throws -> Any? {
        let evaluator = PredicateEvaluator(variables: substitutionVariables.mapValues(Operand.from))
        return try evaluator.value(of: self, on: Operand.from(object)).swiftValue
    }
}
