import Testing
@testable import ArborStore

@Suite("XXH64")
struct ChecksumTests {
    @Test("matches the reference implementation's published values")
    func referenceVectors() {
        #expect(XXH64.hash(Array("".utf8)) == 0xEF46_DB37_51D8_E999)
        #expect(XXH64.hash(Array("a".utf8)) == 0xD24E_C4F1_A98C_6E5B)
        #expect(XXH64.hash(Array("abc".utf8)) == 0x44BC_2CF5_AD77_0999)
        #expect(XXH64.hash(Array("Nobody inspects the spammish repetition".utf8)) == 0xFBCE_A83C_8A37_8BF1)
    }

    @Test("a seed, a flipped bit, or the page number change the page checksum")
    func sensitivity() {
        var page = [UInt8](repeating: 7, count: 512)
        let base = page.withUnsafeBytes { PageLayout.checksum($0, pageNumber: 3) }
        #expect(page.withUnsafeBytes { PageLayout.checksum($0, pageNumber: 4) } != base)
        page[100] ^= 1
        #expect(page.withUnsafeBytes { PageLayout.checksum($0, pageNumber: 3) } != base)
    }
}
