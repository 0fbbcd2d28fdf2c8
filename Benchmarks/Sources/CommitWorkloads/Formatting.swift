/// `value` with exactly `digits` decimals (no Foundation needed): `fixed(2.5, 2)` is `"2.50"`.
public func fixed(_ value: Double, _ digits: Int = 2) -> String {
    guard value.isFinite else { return String(value) }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let scaled = Int64((abs(value) * scale).rounded())
    let divisor = Int64(scale)
    let sign = value < 0 && scaled != 0 ? "-" : ""
    let whole = scaled / divisor
    guard digits > 0 else { return sign + String(whole) }
    let fraction = String(scaled % divisor)
    return sign + String(whole) + "." + String(repeating: "0", count: digits - fraction.count) + fraction
}

/// Syncs per commit, overall and by kind, as `"3.00 (journal 2.00, database 1.00, directory 0.00)"`.
public func describeSyncs(_ syncs: SyncCounts, commits: UInt64) -> String {
    let n = Double(max(commits, 1))
    func per(_ count: UInt64) -> String { fixed(Double(count) / n) }
    var text = "\(per(syncs.total)) (journal \(per(syncs.journal)), database \(per(syncs.database)), directory \(per(syncs.directory))"
    if syncs.other != 0 { text += ", other \(per(syncs.other))" }
    return text + ")"
}

/// `1234567` as `"1,234,567"`.
public func grouped(_ value: Int) -> String {
    var digits = Array(String(abs(value)))
    var index = digits.count - 3
    while index > 0 {
        digits.insert(",", at: index)
        index -= 3
    }
    return (value < 0 ? "-" : "") + String(digits)
}

extension Duration {
    /// The duration in seconds.
    public var seconds: Double { Double(components.seconds) + Double(components.attoseconds) * 1e-18 }
}

/// The middle value (the mean of the two middle ones for an even count; 0 for none).
public func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}
