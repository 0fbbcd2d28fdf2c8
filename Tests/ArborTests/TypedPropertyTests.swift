import Foundation
import Testing
@testable import Arbor

// Issue 25, item 1 and 2: typed properties checked against the model, integer widths that
// interoperate, non-optional required attributes, and refused values that fail validation
// instead of stopping the process.

final class Shelf: ManagedObject {
    @ManagedSet("books") var books: Set<Volume>
}

final class Volume: ManagedObject {
    @Managed("title") var title: String                // required, no default: reads "" until set
    @Managed("pages") var pages: Int?                  // .integer32, read as Int
    @Managed("copies") var copies: Int                 // .integer16, required, default 1
    @Managed("isbn") var isbn: Int64?                  // .integer64
    @Managed("edition") var edition: Int32?            // .integer16, read through a wider type
    @Managed("price") var price: Decimal?
    @Managed("weight") var weight: Double?
    @Managed("rating") var rating: Float?
    @Managed("inPrint") var inPrint: Bool
    @Managed("published") var published: Date          // required, with a default
    @Managed("cover") var cover: Data?
    @Managed("uuid") var uuid: UUID?
    @Managed("homepage") var homepage: URL?
    @Managed("tags") var tags: [String]?
    @Managed("shelf") var shelf: Shelf?
}

let volumeEpoch = Date(timeIntervalSince1970: 1_700_000_000)

func volumeModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Shelf", class: Shelf.self) {
            Relationship("books", to: "Volume", inverse: "shelf").toMany()
        }
        Entity("Volume", class: Volume.self) {
            Attribute("title", .string).required()
            Attribute("pages", .integer32)
            Attribute("copies", .integer16).required().defaultValue(1)
            Attribute("isbn", .integer64)
            Attribute("edition", .integer16)
            Attribute("price", .decimal)
            Attribute("weight", .double)
            Attribute("rating", .float)
            Attribute("inPrint", .boolean).required().defaultValue(false)
            Attribute("published", .date).required().defaultValue(volumeEpoch)
            Attribute("cover", .binaryData)
            Attribute("uuid", .uuid)
            Attribute("homepage", .uri)
            Attribute("tags", .transformable([String].self))
            Relationship("shelf", to: "Shelf", inverse: "books")
        }
    }
}

// Classes whose declarations do not fit their entities.
final class DoublePrice: ManagedObject { @Managed("price") var price: Double? }
final class NarrowPages: ManagedObject { @Managed("pages") var pages: Int16? }
final class UnsignedPages: ManagedObject { @Managed("pages") var pages: UInt64? }
final class TextPages: ManagedObject { @Managed("pages") var pages: String? }
final class RequiredOptional: ManagedObject { @Managed("note") var note: String }
final class DateWithoutDefault: ManagedObject { @Managed("due") var due: Date }
final class SetOnOrdered: ManagedObject { @ManagedSet("items") var items: Set<ManagedObject> }
final class ListOnUnordered: ManagedObject { @ManagedList("items") var items: [ManagedObject] }
final class ManagedOnToMany: ManagedObject { @Managed("items") var items: ManagedObject? }
final class RequiredToOne: ManagedObject { @Managed("owner") var owner: ManagedObject }
final class WrongDestination: ManagedObject { @Managed("owner") var owner: Shelf? }
final class UnknownKey: ManagedObject { @Managed("nope") var nope: String? }
/// A base class whose declaration its subclass inherits: checked on the sub-entity too.
class BaseRecord: ManagedObject { @Managed("count") var count: Int8? }
final class DerivedRecord: BaseRecord {}

@Suite("Typed properties (issue 25)")
struct TypedPropertyTests {
    func stack() throws -> Stack { try Stack(model: try volumeModel()) }

    @Test("item 1: an Int on an .integer32 attribute reads what was written, and sums agree with the key path's @sum (the user's report: the getter gave nil, every sum 0)")
    func integerWidthsInteroperate() throws {
        let stack = try stack()
        let context = stack.context()
        let shelf = Shelf(context: context)
        var expected = 0
        for pages in [120, 348, 15_317, 0, 2_000_000_000] {
            let volume = Volume(context: context)
            volume.title = "Volume of \(pages)"
            volume.pages = pages
            volume.isbn = Int64(pages) * 1_000_003
            volume.edition = Int32(pages % 30_000)
            volume.shelf = shelf
            expected += pages
            #expect(volume.pages == pages)
        }
        try context.save()
        let reader = stack.context()
        let again = try #require(reader.object(with: shelf.objectID) as? Shelf)
        let typedSum = again.books.reduce(0) { $0 + ($1.pages ?? 0) }
        #expect(typedSum == expected)
        let keyPathSum = try again.value(forKeyPath: "books.@sum.pages") as? Int64
        #expect(keyPathSum.map(Int.init) == typedSum)
        #expect(again.books.allSatisfy { $0.isbn == Int64($0.pages!) * 1_000_003 && $0.edition == Int32($0.pages! % 30_000) })
    }

    @Test("item 1: every attribute type reads back through its typed property after a save, in another context (no typed getter returns nil for a value that is there)")
    func everyTypeRoundTrips() throws {
        let stack = try stack()
        let context = stack.context()
        let volume = Volume(context: context)
        let uuid = UUID()
        volume.title = "Dune"
        volume.pages = 412
        volume.copies = 3
        volume.isbn = 9_780_441_172_719
        volume.edition = 2
        volume.price = Decimal(string: "9.99")!
        volume.weight = 0.45
        volume.rating = 4.5
        volume.inPrint = true
        volume.published = Date(timeIntervalSince1970: 0)
        volume.cover = Data([1, 2, 3])
        volume.uuid = uuid
        volume.homepage = URL(string: "https://example.org/dune")!
        volume.tags = ["sf", "classic"]
        try context.save()
        let reader = stack.context()
        let other = try #require(reader.object(with: volume.objectID) as? Volume)
        #expect(other.title == "Dune")
        #expect(other.pages == 412)
        #expect(other.copies == 3)
        #expect(other.isbn == 9_780_441_172_719)
        #expect(other.edition == 2)
        #expect(other.price == Decimal(string: "9.99")!)
        #expect(other.weight == 0.45)
        #expect(other.rating == 4.5)
        #expect(other.inPrint == true)
        #expect(other.published == Date(timeIntervalSince1970: 0))
        #expect(other.cover == Data([1, 2, 3]))
        #expect(other.uuid == uuid)
        #expect(other.homepage == URL(string: "https://example.org/dune")!)
        #expect(other.tags == ["sf", "classic"])
        // Optional properties read nil when nil, and take nil.
        other.pages = nil
        #expect(other.pages == nil)
        #expect(try other.value(forKey: "pages") == nil)
    }

    @Test("item 1: a non-optional required attribute reads its default value, or its type's zero value, while the object holds nil")
    func nonOptionalReads() throws {
        let stack = try stack()
        let context = stack.context()
        let volume = Volume(context: context)
        #expect(volume.title == "", "no default: the zero value")
        #expect(volume.copies == 1, "the default value")
        #expect(volume.inPrint == false)
        #expect(volume.published == volumeEpoch)
        // The placeholder is not a value: the save still refuses the required title.
        #expect(throws: ArborError.self) { try context.save() }
        volume.title = "Set"
        try context.save()
        #expect(volume.title == "Set")
    }

    @Test("item 1: declarations that cannot hold their property's values are a typed model error naming the class, the property, the declared type and the attribute type", arguments: [
        (DoublePrice.self as ManagedObject.Type, "DoublePrice.price", "Double", "decimal"),
        (NarrowPages.self, "NarrowPages.pages", "Int16", "integer32"),
        (UnsignedPages.self, "UnsignedPages.pages", "UInt64", "integer32"),
        (TextPages.self, "TextPages.pages", "String", "integer32"),
        (RequiredOptional.self, "RequiredOptional.note", "String", "string"),
        (DateWithoutDefault.self, "DateWithoutDefault.due", "Date", "date"),
        (SetOnOrdered.self, "SetOnOrdered.items", "Set<ManagedObject>", "relationship to Item"),
        (ListOnUnordered.self, "ListOnUnordered.items", "[ManagedObject]", "relationship to Item"),
        (ManagedOnToMany.self, "ManagedOnToMany.items", "ManagedObject?", "relationship to Item"),
        (RequiredToOne.self, "RequiredToOne.owner", "ManagedObject", "relationship to Item"),
        (WrongDestination.self, "WrongDestination.owner", "Shelf?", "relationship to Item"),
        (UnknownKey.self, "UnknownKey.nope", "String?", "no property"),
    ])
    func mismatchesRefused(objectClass: ManagedObject.Type, property: String, declared: String, attribute: String) throws {
        let ordered = objectClass == SetOnOrdered.self
        let error = try #require(throws: ArborError.self) {
            _ = try ManagedObjectModel {
                Entity("Owner", class: objectClass) {
                    Attribute("price", .decimal)
                    Attribute("pages", .integer32)
                    Attribute("note", .string)
                    Attribute("due", .date).required()
                    Relationship("items", to: "Item", inverse: "owner").toMany(ordered: ordered)
                    Relationship("owner", to: "Item", inverse: "owned")
                }
                Entity("Item") {
                    Relationship("owner", to: "Owner", inverse: "items")
                    Relationship("owned", to: "Owner", inverse: "owner").toMany()
                }
            }
        }
        #expect(error.code == .invalidModel)
        let detail = try #require(error.detailedErrors.first)
        #expect(error.detailedErrors.count == 1)
        #expect(detail.code == .wrongValueType)
        #expect(detail.entityName == "Owner")
        for part in [property, declared, attribute] {
            #expect(detail.message.contains(part), "\(detail.message) names \(part)")
            #expect(error.message.contains(part))
        }
    }

    @Test("item 1: inherited declarations are checked on the sub-entity's class too")
    func inheritedDeclarationsChecked() throws {
        let error = try #require(throws: ArborError.self) {
            _ = try ManagedObjectModel {
                Entity("Record", abstract: true, class: BaseRecord.self) { Attribute("count", .integer64) }
                Entity("Derived", parent: "Record", class: DerivedRecord.self) {}
            }
        }
        #expect(error.detailedErrors.count == 1)
        #expect(error.message.contains("BaseRecord.count") && error.message.contains("Int8") && error.message.contains("integer64"))
    }

    @Test("item 2: a value out of an integer attribute's range, set through a typed property, is not set and fails validation and the save with a typed error naming object, key and value; setting a valid value clears it")
    func refusedIntegerFailsValidation() throws {
        let stack = try stack()
        let context = stack.context()
        let volume = Volume(context: context)
        volume.title = "Big"
        volume.copies = 40_000                        // .integer16
        #expect(volume.copies == 1, "not set: the default stays")
        let error = try #require(throws: ArborError.self) { try volume.validateForInsert() }
        #expect(error.code == .validationNumberTooLarge)
        #expect(error.key == "copies" && error.value == "40000" && error.objectID == volume.objectID)
        let saveError = try #require(throws: ArborError.self) { try context.save() }
        #expect(saveError.code == .validationNumberTooLarge)
        #expect(context.hasChanges && volume.isInserted)
        volume.copies = 7
        try volume.validateForInsert()
        try context.save()
        #expect(volume.copies == 7)
    }

    @Test("item 2: a refusal makes an unchanged saved object changed; the save fails until it is fixed or rolled back")
    func refusalOnSavedObject() throws {
        let stack = try stack()
        let context = stack.context()
        let volume = Volume(context: context)
        volume.title = "Kept"
        try context.save()
        #expect(!context.hasChanges)
        volume.edition = nil
        volume.copies = -40_000
        #expect(volume.hasChanges && volume.isUpdated && context.updatedObjects.contains(volume))
        let error = try #require(throws: ArborError.self) { try context.save() }
        #expect(error.code == .validationNumberTooSmall && error.key == "copies")
        context.rollback()
        #expect(!volume.hasChanges && !context.hasChanges)
        try volume.validateForUpdate()
        // refresh without merging also forgets it.
        volume.copies = 100_000
        context.refresh(volume, mergeChanges: false)
        #expect(!volume.hasChanges)
        try context.save()
    }

    @Test("item 2: an object of another context set through a typed relationship is refused, not fatal; the save names the key")
    func refusedRelationship() throws {
        let stack = try stack()
        let one = stack.context(), two = stack.context()
        let shelf = Shelf(context: one)
        let volume = Volume(context: two)
        volume.title = "Elsewhere"
        volume.shelf = shelf
        #expect(volume.shelf == nil)
        let error = try #require(throws: ArborError.self) { try two.save() }
        #expect(error.code == .misuse && error.key == "shelf" && error.objectID == volume.objectID)
        volume.shelf = nil
        try two.save()
    }
}
