import Foundation

/// Reads ISO-8601 dates, for `CAST('2026-12-01T00:00:00Z', 'NSDate')` in predicates and for the
/// date arguments `arbor query --arg` is given.
///
/// Accepted, as RFC 3339 writes them (the profile of ISO-8601 most tools print):
///
///     2026-12-01                      midnight UTC
///     2026-12-01T09:30Z               minutes, seconds optional
///     2026-12-01T09:30:15.250+01:00   fractional seconds ('.' or ','), any number of digits
///     2026-12-01 09:30:15-0530        a space for the T; offsets ±hh:mm, ±hhmm or ±hh
///
/// A date with a time must name its time zone (`Z` or an offset): a time without one means the
/// reader's local time, which a predicate stored or sent elsewhere must not depend on. Fields are
/// checked (month 1…12, the month's days, hours 0…23, minutes and seconds 0…59, offsets up to
/// 23:59). Years run 0000…9999, in the proleptic Gregorian calendar. No Foundation formatter is
/// involved: the result is exact, and the same on every platform and locale. The fraction is
/// added to the whole seconds since 2001-01-01, the count a `Date` holds, so a date written with
/// ``exactString(from:)`` reads back to the same `Date`, bit for bit.
package enum ISO8601Date {
    /// Why a string is not an ISO-8601 date.
    package struct Invalid: Error, CustomStringConvertible {
        /// What is wrong, for a message (`month 13 is not 1…12`).
        package let reason: String
        package var description: String { reason }
    }

    /// Examples for messages, one of each form.
    package static let examples = "2026-12-01, 2026-12-01T09:30:00Z, 2026-12-01T09:30:00.25+01:00"

    /// The date `text` writes.
    ///
    /// - Throws: ``Invalid`` saying which part is wrong.
    package static func date(from text: String) throws(Invalid) -> Date {
        var reader = Reader(Array(text.utf8))
        let year = try reader.number(digits: 4, "a four-digit year")
        try reader.expect(UInt8(ascii: "-"), "'-' after the year")
        let month = try reader.number(digits: 2, "a two-digit month")
        try reader.expect(UInt8(ascii: "-"), "'-' after the month")
        let day = try reader.number(digits: 2, "a two-digit day")
        guard (1...12).contains(month) else { throw Invalid(reason: "month \(month) is not 1…12") }
        let monthDays = daysIn(month: month, year: year)
        guard (1...monthDays).contains(day) else { throw Invalid(reason: "day \(day) is not 1…\(monthDays) in \(text.prefix(7))") }
        var seconds = Int64(daysSince1970(year: year, month: month, day: day)) * 86_400
        var fraction = 0.0
        if reader.atEnd { return date(secondsSince1970: seconds, fraction: fraction) }

        guard let separator = reader.next(), separator == UInt8(ascii: "T") || separator == UInt8(ascii: "t") || separator == UInt8(ascii: " ") else {
            throw Invalid(reason: "expected 'T' and a time after the date")
        }
        let hour = try reader.number(digits: 2, "a two-digit hour")
        try reader.expect(UInt8(ascii: ":"), "':' after the hour")
        let minute = try reader.number(digits: 2, "two-digit minutes")
        var second = 0
        if reader.take(UInt8(ascii: ":")) {
            second = try reader.number(digits: 2, "two-digit seconds")
            if reader.take(UInt8(ascii: ".")) || reader.take(UInt8(ascii: ",")) {
                let digits = reader.digits()
                guard !digits.isEmpty else { throw Invalid(reason: "expected digits after the decimal separator of the seconds") }
                fraction = Double("0." + String(decoding: digits, as: UTF8.self)) ?? 0
            }
        }
        guard hour <= 23 else { throw Invalid(reason: "hour \(hour) is not 0…23") }
        guard minute <= 59 else { throw Invalid(reason: "minute \(minute) is not 0…59") }
        guard second <= 59 else { throw Invalid(reason: "second \(second) is not 0…59") }
        seconds += Int64(hour * 3600 + minute * 60 + second)

        switch reader.next() {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            break
        case let sign? where sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-"):
            let hours = try reader.number(digits: 2, "a two-digit offset hour")
            var minutes = 0
            if !reader.atEnd {
                _ = reader.take(UInt8(ascii: ":"))
                minutes = try reader.number(digits: 2, "two-digit offset minutes")
            }
            guard hours <= 23, minutes <= 59 else { throw Invalid(reason: "the offset \(hours):\(minutes) is not a time zone's") }
            let offset = Int64(hours * 3600 + minutes * 60)
            seconds -= sign == UInt8(ascii: "+") ? offset : -offset
        case nil:
            throw Invalid(reason: "the time needs a time zone: Z (UTC) or an offset such as +01:00")
        default:
            throw Invalid(reason: "expected the time zone (Z or an offset such as +01:00) after the time")
        }
        guard reader.atEnd else { throw Invalid(reason: "unexpected text after the time zone") }
        return date(secondsSince1970: seconds, fraction: fraction)
    }

    /// The seconds from 1970-01-01 to 2001-01-01, the reference date of `Date`.
    static let referenceDateSince1970: Int64 = 978_307_200

    /// The date `seconds` whole seconds after 1970-01-01 and `fraction` more: the fraction is
    /// added to the whole seconds since the reference date (a whole number, exact), so that a
    /// `Date`'s own fraction, written out in full, comes back exactly.
    static func date(secondsSince1970 seconds: Int64, fraction: Double) -> Date {
        Date(timeIntervalSinceReferenceDate: Double(seconds - referenceDateSince1970) + fraction)
    }

    /// `date` in UTC with the fraction of a second it has, in as few digits as read back to the
    /// same `Date` (`2026-11-28T04:07:38.25Z`; none for a whole second): ``date(from:)`` gives
    /// `date` back, bit for bit. Nil for a date this form cannot write exactly: outside the
    /// years 0000…9999, not finite, or in the last second before 2001-01-01 (the fraction of
    /// a negative count below one second is rounded when it is taken apart).
    package static func exactString(from date: Date) -> String? {
        let interval = date.timeIntervalSinceReferenceDate
        guard interval.isFinite else { return nil }
        let whole = interval.rounded(.down)
        let fraction = interval - whole
        // Years past 9999 (or before 0000) print as no date reads: the check below refuses them.
        guard abs(whole) < 1e15, let seconds = Int64(exactly: whole) else { return nil }
        let text = string(fromSecondsSince1970: seconds + referenceDateSince1970)
        guard fraction > 0 else { return (try? Self.date(from: text)) == date ? text : nil }
        // The digits of the count's own shortest form first (`.1234568`), which nearly always
        // read back; else those of the fraction taken apart (`.12345683574676514`), which do.
        var candidates: [String] = []
        let count = "\(interval)"
        if interval > 0, !count.contains("e"), let point = count.firstIndex(of: ".") {
            candidates.append(String(count[count.index(after: point)...]))
        }
        if let digits = fractionDigits(fraction) { candidates.append(digits) }
        for digits in candidates {
            var written = text
            written.insert(contentsOf: "." + digits, at: written.index(before: written.endIndex))
            if (try? Self.date(from: written)) == date { return written }
        }
        return nil
    }

    /// The digits after "0." of `fraction` (0 < fraction < 1) in its shortest form that reads
    /// back to it (Swift's `description`, which may be `2.5e-07`, written out: `00000025`).
    static func fractionDigits(_ fraction: Double) -> String? {
        let text = "\(fraction)"
        let parts = text.split(separator: "e")
        let mantissa = parts[0].replacingOccurrences(of: ".", with: "")
        guard parts.count == 2, let exponent = Int(parts[1]) else {
            // "0.25": the digits after the point.
            guard text.hasPrefix("0.") else { return nil }
            return String(text.dropFirst(2))
        }
        // "2.5e-07": the mantissa's digits, shifted right by -exponent - 1 zeros.
        guard exponent < 0 else { return nil }
        var digits = String(repeating: "0", count: -exponent - 1) + mantissa
        while digits.hasSuffix("0") { digits.removeLast() }
        return digits
    }

    /// `date` as `ISO8601DateFormatter` writes it by default, in UTC to the second
    /// (`2026-11-28T04:07:38Z`; a fraction of a second is dropped): what a store's model history
    /// records. Years outside 0000…9999 are clamped to them.
    package static func string(from date: Date) -> String {
        let interval = date.timeIntervalSince1970
        let limit = 253_402_300_799.0 // 9999-12-31T23:59:59Z
        return string(fromSecondsSince1970: Int64(interval.isNaN ? 0 : min(max(interval, -62_167_219_200), limit).rounded(.down)))
    }

    /// The whole second `seconds` after 1970-01-01 (before, when negative), in UTC.
    static func string(fromSecondsSince1970 seconds: Int64) -> String {
        let days = Int(seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400)
        let time = Int(seconds - Int64(days) * 86_400)
        let (year, month, day) = civil(daysSince1970: days)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let paddedYear = String(repeating: "0", count: max(0, 4 - String(year).count)) + String(year)
        return "\(paddedYear)-\(two(month))-\(two(day))T\(two(time / 3600)):\(two(time / 60 % 60)):\(two(time % 60))Z"
    }

    /// The date `days` from 1970-01-01 (Howard Hinnant's `civil_from_days`), the inverse of
    /// ``daysSince1970(year:month:day:)``.
    static func civil(daysSince1970 days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Days from 1970-01-01 to the date (negative before), in the proleptic Gregorian calendar
    /// (Howard Hinnant's `days_from_civil`).
    static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// The bytes of the string, read left to right.
    struct Reader {
        let bytes: [UInt8]
        var position = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { position == bytes.count }

        mutating func next() -> UInt8? {
            guard position < bytes.count else { return nil }
            defer { position += 1 }
            return bytes[position]
        }

        /// Takes `byte` when it comes next.
        mutating func take(_ byte: UInt8) -> Bool {
            guard position < bytes.count, bytes[position] == byte else { return false }
            position += 1
            return true
        }

        mutating func expect(_ byte: UInt8, _ what: String) throws(Invalid) {
            guard take(byte) else { throw Invalid(reason: "expected \(what)") }
        }

        /// Exactly `digits` decimal digits.
        mutating func number(digits: Int, _ what: String) throws(Invalid) -> Int {
            var value = 0
            for _ in 0..<digits {
                guard position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) else {
                    throw Invalid(reason: "expected \(what)")
                }
                value = value * 10 + Int(bytes[position] - UInt8(ascii: "0"))
                position += 1
            }
            return value
        }

        /// The run of decimal digits that comes next (possibly none).
        mutating func digits() -> ArraySlice<UInt8> {
            let start = position
            while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) { position += 1 }
            return bytes[start..<position]
        }
    }
}
