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
