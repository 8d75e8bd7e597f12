import Foundation
import HoistHTTP

extension S3Backend {
    public func endStaleUploads(olderThan age: TimeInterval) async throws -> [String] {
        try await abortUploads(olderThan: age)
    }

    /// Aborts the multipart uploads under this URL's prefix that were started before
    /// `olderThan` seconds ago: what killed runs left (their parts cost storage until a
    /// lifecycle rule ends them). Uploads of another prefix, ones started since, and entries whose
    /// key, id or date cannot be read are left alone. Reads at most `maxPages` pages of 1,000.
    /// - Returns: the keys whose uploads were aborted.
    public func abortUploads(olderThan age: TimeInterval, now: Date = Date(), maxPages: Int = 100) async throws -> [String] {
        var aborted: [String] = []
        var markers: [(name: String, value: String)] = []
        for _ in 0..<maxPages {
            let response = try await send("GET", key: nil, query: [("uploads", ""), ("prefix", configuration.prefix)] + markers)
            guard response.status == 200 else { throw failure(response, object: nil, bucketLevel: true) }
            let xml = try parse(response)
            for upload in xml.records("*/Upload") {
                guard let key = upload["Key"], key.hasPrefix(configuration.prefix), let id = upload["UploadId"],
                      S3MultipartSession.isValidUploadID(id), let started = upload["Initiated"].flatMap(S3CredentialSource.date),
                      now.timeIntervalSince(started) >= age
                else { continue }
                let answer = try await send("DELETE", key: key, query: [("uploadId", id)])
                if [200, 204, 404].contains(answer.status) { aborted.append(key) }
            }
            guard xml.first("*/IsTruncated") == "true", let key = xml.first("*/NextKeyMarker"),
                  let id = xml.first("*/NextUploadIdMarker") else { break }
            markers = [("key-marker", key), ("upload-id-marker", id)]
        }
        return aborted
    }
}
