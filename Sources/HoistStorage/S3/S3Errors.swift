import Foundation
import HoistHTTP

/// S3's error answers as `StorageFailure`s: the XML `<Error>`'s `Code` decides, the status when
/// there is no body (a `HEAD`). Everything read from the answer is bounded and allow-listed
/// before it reaches a message.
enum S3Errors {
    /// What the answer says: its `Code`, `Message` and the region it names (`Region`, or the
    /// `x-amz-bucket-region` header), each checked.
    struct Said {
        var code: String?
        var message: String?
        var region: String?

        init(_ response: HTTPResponse) {
            let xml = try? S3XML(response.body)
            code = xml?.first("Error/Code").flatMap { S3Errors.token($0, max: 64) }
            message = xml?.first("Error/Message").map { printable($0, limit: outsideTextLimit) }
            let named = response.header("x-amz-bucket-region") ?? xml?.first("Error/Region")
            region = named.flatMap { (try? S3Values.checkRegion($0)) != nil ? $0 : nil }
        }
    }

    /// `text` when it is 1 to `max` letters and digits, else nil.
    static func token(_ text: String, max: Int) -> String? {
        (1...max).contains(text.count) && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } ? text : nil
    }

    /// 401 and `InvalidAccessKeyId`/`SignatureDoesNotMatch`: unauthenticated; 403: unauthorized;
    /// `NoSuchBucket` (and 404 on bucket-level calls): bucketNotFound; other 404s, `NoSuchKey` and
    /// `NoSuchUpload`: objectNotFound; `BadDigest`/`InvalidDigest`: nonMatchingChecksum;
    /// 408, 429, 5xx but 501 (`SlowDown`, `InternalError`) and `RequestTimeout`: retryable, with `Retry-After`.
    /// `object` is the reference's path (in `details`); `key` the whole key, the URL's prefix
    /// included, which messages name.
    static func failure(_ response: HTTPResponse, bucket: String, object: String?, key: String? = nil, bucketLevel: Bool,
                        region: String) -> StorageFailure {
        let said = Said(response)
        let status = response.status
        let key = key ?? object
        let where_ = "s3://\(bucket)/\(key ?? "")"
        var code = StorageErrorCode.unknown
        var message = "S3 answered \(status)" + (said.code.map { " \($0)" } ?? "") + (said.message.map { ": \($0)" } ?? ".")
        switch (said.code, status) {
        case ("InvalidAccessKeyId", _), ("SignatureDoesNotMatch", _), (_, 401):
            code = .unauthenticated
            message = "S3 refused the credentials (\(said.code ?? "401")) for \(where_): check the access key id and the secret."
        case ("NoSuchBucket", _):
            code = .bucketNotFound
            message = "Bucket \(bucket) does not exist."
        case (nil, 404) where bucketLevel:
            code = .bucketNotFound
            message = "Bucket \(bucket) does not exist."
        case ("NoSuchKey", _), ("NoSuchUpload", _), (_, 404):
            code = .objectNotFound
            // Firebase's words for a missing object name the reference's path, as every backend's do.
            message = said.code == "NoSuchUpload" ? "The multipart upload of \(where_) is gone." : "Object \(object ?? "") does not exist."
        case ("BadDigest", _), ("InvalidDigest", _), ("XAmzContentChecksumMismatch", _):
            code = .nonMatchingChecksum
            message = "S3 refused the bytes of \(where_) (\(said.code!)): what arrived does not match the checksum Hoist sent; nothing was stored."
        case (_, 301), ("AuthorizationHeaderMalformed", _), ("PermanentRedirect", _), ("IncorrectEndpoint", _):
            message = "Bucket \(bucket) is not in region \(region)" + (said.region.map { ": it is in \($0); set AWS_REGION=\($0) or storage.region." }
                ?? ": set AWS_REGION or storage.region to its region.")
        case (_, 403):
            code = .unauthorized
            message = "User does not have permission to access \(where_)" + (said.code.map { " (\($0))." } ?? ".")
        default:
            break
        }
        var details = ["bucket": bucket]
        if let object { details["object"] = object }
        if let serverCode = said.code { details["s3Code"] = serverCode }
        let retryable = status == 408 || status == 429 || (status >= 500 && status != 501) || said.code == "RequestTimeout" || said.code == "SlowDown"
        return StorageFailure(code, message, retryable: retryable,
                              retryAfter: retryable ? response.header("Retry-After").flatMap { TimeInterval($0).map { max(0, min($0, 600)) } } : nil,
                              httpStatus: status, responseBody: String(response.bodyText.prefix(2000)), details: details)
    }
}
