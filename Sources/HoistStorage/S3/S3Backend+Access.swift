import Foundation
import HoistHTTP

extension S3Backend {
    /// One `ListObjectsV2` of at most one key, with short timeouts: no credentials (for AWS
    /// itself), an unreachable endpoint, a refused key or secret, a missing bucket and a bucket in
    /// another region each fail at once with one sentence saying what to do. An `AccessDenied`
    /// passes: an upload-only key may not list the bucket, yet it works.
    public func checkAccess() async throws {
        let endpoint = configuration.endpoint
        // Unsigned requests only when asked for: under cron's bare environment a missing envFile
        // would otherwise turn into a 403 per file, or uploads to a bucket open to anyone.
        if credentialSource.isEmpty, !configuration.anonymous {
            throw StorageFailure(
                .unauthenticated,
                "No credentials for s3://\(bucket) at \(endpoint): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE "
                    + "with a profile in ~/.aws/credentials (or storage.credentials in the job); for a bucket that takes unsigned "
                    + "requests, anonymous: true (hoist cp --anonymous).", details: ["bucket": bucket])
        }
        let response: HTTPResponse
        do {
            response = try await send("GET", key: nil, query: [("list-type", "2"), ("max-keys", "1")], quick: true)
        } catch let failure as StorageFailure where failure.noAnswer {
            throw HTTPBackend.unreachable(failure, service: "S3", endpoint: endpoint, settings: "the endpoint (AWS_ENDPOINT_URL, storage.endpoint)",
                                          bucket: bucket)
        }
        if response.status == 200 {
            // The bucket's own listing, or the check proved nothing: a server that takes the bucket
            // from the path answers a virtual-host request with the list of all buckets (radosgw
            // without `rgw dns name`), and the uploads would go to a bucket named after the host.
            let xml = try? parse(response)
            let name = xml?.first("ListBucketResult/Name")
            if name == bucket { return }
            let came = name.map { "the listing of bucket \(printable($0, limit: 100))" }
                ?? xml?.rootName.map { "<\(printable($0, limit: 100))>" } ?? "an empty answer"
            throw StorageFailure(.invalidArgument, "S3 at \(endpoint) answered the check of s3://\(bucket) with \(came), not the bucket's "
                + "listing: a server that takes the bucket from the path needs pathStyle: true in the job's storage.", details: ["bucket": bucket])
        }
        let said = S3Errors.Said(response)
        var failure = failure(response, object: nil, bucketLevel: true)
        switch failure.code {
        case .unauthorized where said.code == "AccessDenied" || said.code == nil:
            return
        case .unauthenticated:
            let source = configuration.credentialsProfile.map { "the profile \($0) in \(configuration.credentialsFile ?? "?")" }
                ?? "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            failure.message = "S3 at \(endpoint) refused the credentials for s3://\(bucket) (\(said.code ?? "401")): check the "
                + "access key id and the secret in \(source)."
        case .bucketNotFound:
            failure.message = "Bucket \(bucket) does not exist at \(endpoint): check storage.url (s3://BUCKET[/PREFIX]) and the endpoint."
        default:
            break
        }
        throw failure
    }
}
