import Foundation
import HoistHTTP

extension S3Backend {
    public func endStaleUploads(olderThan age: TimeInterval, startedBy sessions: Set<String>) async throws -> [String] {
        try await abortUploads(olderThan: age, startedBy: sessions)
    }

    /// Aborts the multipart uploads under this URL's prefix that were started before
    /// `olderThan` seconds ago and that `sessions` names (session ids, `Plan.id`, as a job's
    /// journal keeps them: the same key and upload id): what the job's killed runs left (their
    /// parts cost storage until a lifecycle rule ends them). Any other upload is left alone
    /// (another application's in the same bucket and prefix, which is not the job's to end), as are uploads of
    /// another prefix, ones started since, and entries whose key, id or date cannot be read.
    /// Reads at most `maxPages` pages of 1,000; none when `sessions` names no multipart upload.
    /// - Returns: the keys whose uploads were aborted.
    public func abortUploads(olderThan age: TimeInterval, startedBy sessions: Set<String>, now: Date = Date(), maxPages: Int = 100)
        async throws -> [String]
    {
        let ours = Set(sessions.compactMap { S3MultipartSession.Plan(id: $0).map { $0.key + "\n" + $0.uploadID } })
        guard !ours.isEmpty else { return [] }
        var aborted: [String] = []
        var markers: [(name: String, value: String)] = []
        for _ in 0..<maxPages {
            let response = try await send("GET", key: nil, query: [("uploads", ""), ("prefix", configuration.prefix)] + markers)
            guard response.status == 200 else { throw failure(response, object: nil, bucketLevel: true) }
            let xml = try parse(response)
            for upload in xml.records("*/Upload") {
                guard let key = upload["Key"], key.hasPrefix(configuration.prefix), let id = upload["UploadId"],
                      S3MultipartSession.isValidUploadID(id), let started = upload["Initiated"].flatMap(S3CredentialSource.date),
                      now.timeIntervalSince(started) >= age, ours.contains(key + "\n" + id)
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
