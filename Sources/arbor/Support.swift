import ArgumentParser
import ArborStore

/// Options shared by the commands that take keys and values on the command line.
struct EncodingOptions: ParsableArguments {
    @Flag(help: "Keys and values are given (and printed) as hexadecimal instead of UTF-8 text.")
    var hex = false

    func bytes(_ text: String, what: String) throws -> [UInt8] {
        guard hex else { return Array(text.utf8) }
        guard let bytes = parseHex(text) else {
            throw ValidationError("\(what) \"\(text)\" is not hexadecimal (an even number of 0-9 a-f digits)")
        }
        return bytes
    }

    func format(_ bytes: [UInt8]) -> String {
        if !hex, let text = String(validating: bytes, as: UTF8.self), !text.contains(where: { $0.isNewline || $0 == "\t" }) {
            return text
        }
        return hexString(bytes)
    }
}

func parseHex(_ text: String) -> [UInt8]? {
    let digits = Array(text.utf8)
    guard digits.count % 2 == 0 else { return nil }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(digits.count / 2)
    var index = 0
    while index < digits.count {
        guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
        bytes.append(high << 4 | low)
        index += 2
    }
    return bytes
}

func hexValue(_ digit: UInt8) -> UInt8? {
    switch digit {
    case 0x30...0x39: digit - 0x30
    case 0x61...0x66: digit - 0x61 + 10
    case 0x41...0x46: digit - 0x41 + 10
    default: nil
    }
}

let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

func hexString(_ bytes: [UInt8]) -> String {
    var output = [UInt8]()
    output.reserveCapacity(bytes.count * 2)
    for byte in bytes {
        output.append(hexDigits[Int(byte >> 4)])
        output.append(hexDigits[Int(byte & 15)])
    }
    return String(decoding: output, as: UTF8.self)
}

/// Opens a database for a command, waiting up to `busyTimeout` for other connections' locks.
func openDatabase(_ path: String, readOnly: Bool, create: Bool = false, busyTimeout: Duration = .seconds(5)) throws -> Database {
    var options = DatabaseOptions()
    options.readOnly = readOnly
    options.create = create
    options.busyTimeout = busyTimeout
    return try Database(path: path, options: options)
}

/// The tree named `name`, or exit status 1 with a message.
func requireTree(_ transaction: ReadTransaction, _ name: String, file: String) throws -> Tree {
    guard let tree = try transaction.tree(named: name) else {
        printError("arbor: \(file): no tree named \"\(name)\"")
        throw ExitCode(1)
    }
    return tree
}
