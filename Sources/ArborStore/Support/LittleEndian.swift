// Little-endian loads and stores at byte offsets of raw buffers: every integer the engine keeps
// on disk is little-endian and may sit at any alignment.
//
// One concrete function per width, not one generic over `FixedWidthInteger`: the generic one is
// specialised only within a whole-module optimised build. In a debug build (a dependent's, say)
// or at -O without whole-module optimisation every call would go through witness tables, and
// the pages' headers and cell offsets are read on every B-tree step.
// Call sites read the same: `body.loadLE(UInt16.self, at: 2)`.

// Safety: The loads and stores are unaligned accesses at offsets their callers keep inside the
// buffer (which checks its bounds in debug builds).

extension UnsafeRawBufferPointer {
    @inline(__always)
    func loadLE(_: UInt16.Type, at offset: Int) -> UInt16 {
        UInt16(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt16.self))
    }

    @inline(__always)
    func loadLE(_: UInt32.Type, at offset: Int) -> UInt32 {
        UInt32(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    @inline(__always)
    func loadLE(_: UInt64.Type, at offset: Int) -> UInt64 {
        UInt64(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }
}

// The mutable buffer's loads repeat the immutable ones rather than forward to them: forwarding
// would add a conversion and a call per load in unoptimised builds, on the same hot paths.
extension UnsafeMutableRawBufferPointer {
    @inline(__always)
    func loadLE(_: UInt16.Type, at offset: Int) -> UInt16 {
        UInt16(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt16.self))
    }

    @inline(__always)
    func loadLE(_: UInt32.Type, at offset: Int) -> UInt32 {
        UInt32(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    @inline(__always)
    func loadLE(_: UInt64.Type, at offset: Int) -> UInt64 {
        UInt64(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    @inline(__always)
    func storeLE(_ value: UInt16, at offset: Int) {
        storeBytes(of: value.littleEndian, toByteOffset: offset, as: UInt16.self)
    }

    @inline(__always)
    func storeLE(_ value: UInt32, at offset: Int) {
        storeBytes(of: value.littleEndian, toByteOffset: offset, as: UInt32.self)
    }

    @inline(__always)
    func storeLE(_ value: UInt64, at offset: Int) {
        storeBytes(of: value.littleEndian, toByteOffset: offset, as: UInt64.self)
    }
}
