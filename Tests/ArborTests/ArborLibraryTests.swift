import Arbor
import ArborTestSupport
import Testing

@Suite("Arbor module")
struct ArborLibraryTests {
    @Test("re-exports the engine and names the format versions it reads and writes")
    func reexportsEngine() throws {
        #expect(ArborLibrary.formatVersions.read == DatabaseHeader.currentReadVersion)
        #expect(ArborLibrary.formatVersions.write == DatabaseHeader.currentWriteVersion)
        var options = DatabaseOptions()
        options.fileSystem = SimulatedDisk()
        options.lockTable = LockTable()
        let database = try Database(path: "/arbor", options: options)
        try database.write { (tx) throws in try tx.createTree(named: "entities").put([1], [2]) }
        #expect(try database.read { (tx) throws in try tx.tree(named: "entities")?.get([1]) } == [2])
    }
}
