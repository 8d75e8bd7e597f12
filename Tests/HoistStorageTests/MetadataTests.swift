import Foundation
import HoistTestSupport
import Testing
@testable import HoistStorage

@Suite struct MetadataTests {
    /// An object resource as the GCS JSON API returns it.
    let gcsJSON = """
        {"kind":"storage#object","id":"b/images/a.jpg/1700000000000001","bucket":"b","name":"images/a.jpg",
         "size":"1234","md5Hash":"XrY7u+Ae7tCTyyK7j1rNww==","crc32c":"yZRlqg==","generation":"1700000000000001",
         "metageneration":"2","timeCreated":"2026-11-23T09:10:31.123Z","updated":"2026-11-23T10:00:00.000Z",
         "contentType":"image/jpeg","cacheControl":"public, max-age=60","contentDisposition":"inline",
         "contentEncoding":"gzip","contentLanguage":"en","metadata":{"camera":"x100","firebaseStorageDownloadTokens":"t"}}
        """

    @Test func decodesTheGCSObjectResource() throws {
        let resource = try JSONDecoder().decode(ObjectResource.self, from: Data(gcsJSON.utf8))
        let metadata = StorageMetadata(resource)
        #expect(metadata.bucket == "b")
        #expect(metadata.path == "images/a.jpg")
        #expect(metadata.name == "a.jpg")
        #expect(metadata.size == 1234)
        #expect(metadata.md5Hash == "XrY7u+Ae7tCTyyK7j1rNww==")
        #expect(metadata.generation == 1_700_000_000_000_001)
        #expect(metadata.metageneration == 2)
        #expect(abs(try #require(metadata.timeCreated).timeIntervalSince1970 - 1_795_425_031.123) < 0.000_5)
        #expect(metadata.contentType == "image/jpeg")
        #expect(metadata.cacheControl == "public, max-age=60")
        #expect(metadata.contentDisposition == "inline")
        #expect(metadata.contentEncoding == "gzip")
        #expect(metadata.contentLanguage == "en")
        #expect(metadata.customMetadata == ["camera": "x100", "firebaseStorageDownloadTokens": "t"])
        #expect(resource.crc32c == "yZRlqg==")
        #expect(metadata.isFile)
    }

    @Test func jsonRoundTripKeepsEveryField() throws {
        let resource = try JSONDecoder().decode(ObjectResource.self, from: Data(gcsJSON.utf8))
        let encoded = try JSONEncoder().encode(resource)
        let again = try JSONDecoder().decode(ObjectResource.self, from: encoded)
        #expect(again == resource)
        // 64-bit integers stay strings on the wire, as GCS writes them.
        let object = try JSONSerialization.jsonObject(with: encoded) as? [String: Any]
        #expect(object?["size"] as? String == "1234")
        #expect(object?["generation"] as? String == "1700000000000001")
        #expect(object?["timeCreated"] as? String == "2026-11-23T09:10:31.123Z")
    }

    @Test func dictionaryRoundTrip() throws {
        let metadata = StorageMetadata(try JSONDecoder().decode(ObjectResource.self, from: Data(gcsJSON.utf8)))
        let dictionary = metadata.dictionaryRepresentation()
        #expect(dictionary["name"] as? String == "images/a.jpg")
        #expect(dictionary["metadata"] as? [String: String] == ["camera": "x100", "firebaseStorageDownloadTokens": "t"])
        let copy = StorageMetadata(dictionary: dictionary)
        #expect(copy == metadata)
        #expect(copy.updated == metadata.updated)
    }

    @Test func emptyMetadataIsWritableAndEmpty() {
        let metadata = StorageMetadata()
        #expect(metadata.dictionaryRepresentation().isEmpty)
        metadata.contentType = "image/jpeg"
        metadata.customMetadata = ["k": "v"]
        #expect(metadata.dictionaryRepresentation() == ["contentType": "image/jpeg", "metadata": ["k": "v"] as [String: String]])
        #expect(!metadata.isFile)
        #expect(metadata.size == 0 && metadata.generation == 0 && metadata.md5Hash == nil)
    }

    @Test func badResourcesAreRejected() {
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(ObjectResource.self, from: Data(#"{"size":"12x"}"#.utf8))
        }
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(ObjectResource.self, from: Data(#"{"updated":"yesterday"}"#.utf8))
        }
    }
}
