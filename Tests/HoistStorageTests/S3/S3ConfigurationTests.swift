import Foundation
import HoistHTTP
import HoistTestSupport
import Testing
@testable import HoistStorage

/// The S3 backend's pure logic: its configuration read from the environment and AWS's files,
/// the session ids a journal hands back, S3's XML and headers, each read as hostile input.
@Suite struct S3ConfigurationTests {
    /// Virtual-host addressing puts the bucket in the host name: an IP address or `localhost`
    /// cannot carry it (`hoist-test.127.0.0.1` is a name no DNS serves). Path style there, even
    /// with `pathStyle: false`, and the options' warnings say the setting was overridden.
    @Test func anIPOrLocalhostEndpointIsAlwaysPathStyle() throws {
        for endpoint in ["http://127.0.0.1:7480", "http://localhost:7480", "https://[::1]:9000/", "http://10.0.0.5"] {
            let configuration = S3Backend.Configuration(bucket: "hoist-test", endpoint: endpoint, pathStyle: false)
            #expect(configuration.pathStyle, "\(endpoint)")
            #expect(S3Backend(configuration).location(key: "a.txt").url.contains("/hoist-test/a.txt"), "\(endpoint)")
        }
        for endpoint in ["https://minio.internal:9000", "https://s3.example.com"] {
            #expect(!S3Backend.Configuration(bucket: "hoist-test", endpoint: endpoint, pathStyle: false).pathStyle, "\(endpoint)")
        }
        var options = S3Options()
        options.endpoint = "http://127.0.0.1:7480"
        options.pathStyle = false
        #expect(options.warnings.contains { $0.contains("pathStyle: false") && $0.contains("127.0.0.1") }, "\(options.warnings)")
        options.pathStyle = nil
        #expect(options.warnings.isEmpty)
    }

    @Test func theEnvironmentsKeysRegionAndEndpoint() throws {
        let configuration = try S3Backend.Configuration.fromEnvironment(bucket: "my-bucket", prefix: "/backups/daily/", [
            "HOME": "/nonexistent", "AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "secret/env",
            "AWS_SESSION_TOKEN": "token", "AWS_DEFAULT_REGION": "eu-west-1", "AWS_REGION": "eu-central-1",
            "AWS_ENDPOINT_URL": "http://other:1", "AWS_ENDPOINT_URL_S3": "http://minio:9000/",
        ])
        #expect(configuration.credentials == S3Credentials(accessKeyID: "AKIDENV", secretAccessKey: "secret/env", sessionToken: "token"))
        #expect(configuration.region == "eu-central-1")   // AWS_REGION before AWS_DEFAULT_REGION
        #expect(configuration.endpoint == "http://minio:9000")   // the S3-specific one first
        #expect(configuration.pathStyle)   // an endpoint of one's own
        #expect(configuration.prefix == "backups/daily/")
        let aws = try S3Backend.Configuration.fromEnvironment(bucket: "my-bucket", ["HOME": "/nonexistent", "AWS_REGION": "ap-south-1"])
        #expect(aws.endpoint == "https://s3.ap-south-1.amazonaws.com" && !aws.pathStyle && aws.credentials == nil)
        #expect(S3Backend(aws).location(key: "a b/c").url == "https://my-bucket.s3.ap-south-1.amazonaws.com/a%20b/c")
    }

    /// A refused value names the option it came from as data (`StorageFailure.key`), which the
    /// registration makes the manifest's key (`BackendOptionError`); a value from the
    /// environment names none, even when its message holds an option's text.
    @Test func aRefusedOptionIsNamedByItsKeyNotByItsMessage() throws {
        func refused(_ environment: [String: String] = [:], endpoint: String? = nil, region: String? = nil,
                     profile: String? = nil, credentialsFile: String? = nil) -> StorageFailure? {
            do {
                _ = try S3Backend.Configuration.fromEnvironment(
                    bucket: "b-1", ["HOME": "/nonexistent"].merging(environment) { $1 }, endpoint: endpoint, region: region,
                    profile: profile, credentialsFile: credentialsFile)
                return nil
            } catch {
                return error as? StorageFailure
            }
        }
        let home = try TemporaryDirectory()
        let malformed = try home.write("creds", Data("not a section\n".utf8))
        #expect(refused(region: "not a region!")?.key == "region")
        #expect(refused(endpoint: "ftp://minio:9000")?.key == "endpoint")
        #expect(refused(profile: "absent")?.key == "credentials")
        #expect(refused(credentialsFile: malformed.path)?.key == "credentials")
        let fromEnvironment = [refused(["AWS_REGION": "not a region!"]),
                               refused(["AWS_ENDPOINT_URL": "ftp://eu-west-1.example"], region: "eu-west-1")]
        for failure in fromEnvironment {
            #expect(failure != nil && failure?.key == nil, "\(String(describing: failure))")
        }
        var options = S3Options()
        options.region = "not a region!"
        let context = BackendContext(location: try StorageLocation(parsing: "s3://b-1"), options: options,
                                     environment: ["HOME": "/nonexistent"])
        do {
            _ = try S3Backend(context)
            Issue.record("a refused region was accepted")
        } catch let error as BackendOptionError {
            #expect(error.key == "region" && error.message.contains("is not an AWS region"), "\(error)")
        }
    }

    @Test func aProfileFromTheCredentialsAndConfigFiles() throws {
        let home = try TemporaryDirectory()
        _ = try home.write(".aws/credentials", Data("""
            [default]
            aws_access_key_id = AKIDDEFAULT
            aws_secret_access_key = default-secret
            # a comment
            [work]
            aws_access_key_id=AKIDWORK
            aws_secret_access_key = work-secret
            aws_session_token = work-token
            """.utf8))
        _ = try home.write(".aws/config", Data("""
            [profile work]
            region = us-west-2
            endpoint_url = https://r2.example.com
            s3 =
              addressing_style = path
            """.utf8))
        let environment = ["HOME": home.url.path, "AWS_PROFILE": "work", "AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "x"]
        // AWS_PROFILE names the profile, but keys in the environment win, as in the AWS CLI.
        let fromEnv = try S3Backend.Configuration.fromEnvironment(bucket: "b-1", environment)
        #expect(fromEnv.credentials?.accessKeyID == "AKIDENV")
        #expect(fromEnv.region == "us-west-2" && fromEnv.endpoint == "https://r2.example.com")
        // A profile named by the job wins over the environment's keys.
        let named = try S3Backend.Configuration.fromEnvironment(bucket: "b-1", environment, profile: "work")
        #expect(named.credentials == S3Credentials(accessKeyID: "AKIDWORK", secretAccessKey: "work-secret", sessionToken: "work-token"))
        #expect(named.credentialsProfile == "work" && named.credentialsFile == home.url.path + "/.aws/credentials")
        let plain = try S3Backend.Configuration.fromEnvironment(bucket: "b-1", ["HOME": home.url.path])
        #expect(plain.credentials?.accessKeyID == "AKIDDEFAULT" && plain.region == "us-east-1")
        // A web identity in the environment comes before the files, as in AWS's SDKs.
        let pod = try S3Backend.Configuration.fromEnvironment(bucket: "b-1", [
            "HOME": home.url.path, "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token", "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/r",
        ])
        #expect(pod.credentials == nil && pod.webIdentity?.stsEndpoint == "https://sts.us-east-1.amazonaws.com")
        #expect(throws: StorageFailure.self) {
            try S3Backend.Configuration.fromEnvironment(bucket: "b-1", ["HOME": home.url.path], profile: "absent")
        }
    }

    @Test func hostileValuesAreRefusedWithTheirName() {
        let home = ["HOME": "/nonexistent"]
        func message(_ environment: [String: String], bucket: String = "good-bucket") -> String {
            do {
                _ = try S3Backend.Configuration.fromEnvironment(bucket: bucket, home.merging(environment) { $1 })
                return "accepted"
            } catch {
                return "\(error)"
            }
        }
        #expect(message(["AWS_REGION": "us-east-1\r\nX: y"]).contains("is not an AWS region"))
        #expect(message(["AWS_ENDPOINT_URL": "file:///etc/passwd"]).contains("is not an S3 endpoint"))
        #expect(message(["AWS_ENDPOINT_URL": "http://user:pw@host"]).contains("is not an S3 endpoint"))
        #expect(message(["AWS_ACCESS_KEY_ID": "AKID\nX", "AWS_SECRET_ACCESS_KEY": "s"]).contains("access key id"))
        #expect(message(["AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SESSION_TOKEN": "t\r\nX-Evil: 1"])
            .contains("session token"))
        #expect(message([:], bucket: "a").contains("is not an S3 bucket name"))
        #expect(message([:], bucket: "../etc").contains("is not an S3 bucket name"))
    }

    @Test func s3URLsAreServedByTheRegistry() {
        let backend = BackendRegistry.backend(for: "s3://hoist-bucket/some/prefix")
        let s3 = backend as? S3Backend
        #expect(s3?.bucket == "hoist-bucket" && s3?.configuration.prefix == "some/prefix/")
        #expect(s3?.key("a.txt") == "some/prefix/a.txt")
        #expect(BackendRegistry.backend(for: "s3://x") is UnsupportedBackend)
    }

    // MARK: - Session ids

    @Test func sessionIDsRoundTripAndHostileOnesAreRefused() throws {
        let plan = S3MultipartSession.Plan(key: "dir/ü b:c.bin", uploadID: "abc.DEF_-~+/=", size: 20 << 20, partSize: 5 << 20)
        #expect(S3MultipartSession.Plan(id: plan.id) == plan)
        #expect(plan.partCount == 4 && plan.range(of: 4).offset == 15 << 20 && plan.range(of: 4).length == 5 << 20)
        for bad in ["", "put:123", "s3mpu1:", "s3mpu1:-1:5242880:a2V5:up",
                    "s3mpu1:99999999999999:5242880:a2V5:up", "s3mpu1:20971520:5242880:a2V5:up\nHost: evil",
                    "s3mpu1:20971520:5242880:a2V5:up id", "s3mpu1:20971520:5242880:!!!:up",
                    "s3mpu1:20971520:5242880::up", "s3mpu1:20971520:1024:a2V5:up"] {
            #expect(S3MultipartSession.Plan(id: bad) == nil, "\(bad)")
        }
        // An upload created with checksums is `s3mpu2:`; one an earlier Hoist made, without, `s3mpu1:`.
        #expect(plan.checksummed && plan.id.hasPrefix("s3mpu2:"))
        let old = S3MultipartSession.Plan(id: "s3mpu1:" + plan.id.dropFirst("s3mpu2:".count))
        #expect(old?.checksummed == false && old?.key == plan.key && old?.id.hasPrefix("s3mpu1:") == true)
    }

    /// An ETag is an MD5 only for objects stored plain or with SSE-S3 (an allow-list: SSE-KMS,
    /// its dual-layer form, SSE-C and a kind Hoist does not know are not); a CRC32C is the
    /// object's only in S3's form and unless `COMPOSITE` (the CRC of the parts' CRCs).
    @Test func whichETagsAreMD5sAndWhichCRC32CsAreTheObjects() {
        func answer(_ headers: [String: String]) -> HTTPResponse { HTTPResponse(status: 200, headers: headers, body: Data()) }
        #expect(S3Headers.etagIsMD5(answer([:])) && S3Headers.etagIsMD5(answer(["x-amz-server-side-encryption": "AES256"])))
        for kind in ["aws:kms", "aws:kms:dsse", "aws:fsx", ""] {
            #expect(!S3Headers.etagIsMD5(answer(["x-amz-server-side-encryption": kind])), "\(kind)")
        }
        #expect(!S3Headers.etagIsMD5(answer(["x-amz-server-side-encryption-customer-algorithm": "AES256"])))
        #expect(S3Headers.objectCRC32C("yZRlqg==", type: nil) == "yZRlqg==")
        #expect(S3Headers.objectCRC32C("yZRlqg==", type: "FULL_OBJECT") == "yZRlqg==")
        for (value, type) in [("yZRlqg==", "COMPOSITE"), ("yZRlqg==-3", nil), ("yZRlqg==", "full_object"), ("not-b64!", nil), ("", nil)] {
            #expect(S3Headers.objectCRC32C(value, type: type) == nil, "\(value) \(type ?? "-")")
        }
    }

    @Test func resumingAnotherObjectsSessionIsRefused() async throws {
        let backend = S3Backend(S3Backend.Configuration(bucket: "bkt", endpoint: "http://127.0.0.1:9"))
        let plan = S3MultipartSession.Plan(key: "a.bin", uploadID: "up", size: 20 << 20, partSize: 5 << 20)
        await #expect { _ = try await backend.resumeUpload(id: plan.id, for: "b.bin") } throws: {
            StorageErrorCode(of: $0) == .invalidArgument
        }
        await #expect { _ = try await backend.resumeUpload(id: "https://evil/upload") } throws: {
            StorageErrorCode(of: $0) == .objectNotFound
        }
        #expect(S3MultipartSession.partSize(for: 1 << 40, configured: 8 << 20, chunkSize: nil) >= (1 << 40) / 10_000)
        #expect(S3MultipartSession.partSize(for: 100 << 20, configured: 8 << 20, chunkSize: 1 << 20) == 5 << 20)
    }

    // MARK: - XML and headers

    @Test func xmlIsReadWithinBounds() throws {
        let list = try S3XML(Data("""
            <?xml version="1.0" encoding="UTF-8"?>
            <ListPartsResult><UploadId>u&amp;1</UploadId><Part><PartNumber>1</PartNumber><ETag>&quot;ab&quot;</ETag>\
            <Size>5</Size></Part><Part><PartNumber>2</PartNumber><ETag>&#34;cd&#x22;</ETag><Size>6</Size></Part>\
            <IsTruncated>false</IsTruncated><Empty/></ListPartsResult>
            """.utf8))
        #expect(list.first("ListPartsResult/UploadId") == "u&1")
        #expect(list.records("ListPartsResult/Part") == [["PartNumber": "1", "ETag": "\"ab\"", "Size": "5"],
                                                          ["PartNumber": "2", "ETag": "\"cd\"", "Size": "6"]])
        for hostile in ["<!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]><a>&e;</a>", "<a><b></a>", "<a>&unknown;</a>",
                        "<a>", String(repeating: "<a>", count: 40) + String(repeating: "</a>", count: 40), "<a>&#1114112;</a>"] {
            #expect(throws: S3XML.Malformed.self, "\(hostile.prefix(40))") { try S3XML(Data(hostile.utf8)) }
        }
    }

    @Test func metadataHeadersRoundTripAndHostileKeysAreRefused() throws {
        let resource = ObjectResource(contentType: "text/plain", cacheControl: "no-cache", contentDisposition: "inline; filename=\"é.txt\"",
                                      contentLanguage: "fr", metadata: ["Owner": "ada", "emoji": "🚀"])
        let headers = try S3Headers.objectHeaders(resource)
        #expect(headers.allSatisfy { $0.value.unicodeScalars.allSatisfy { (0x20..<0x7F).contains($0.value) } })
        #expect(headers.contains { $0 == ("x-amz-meta-owner", "ada") })
        let answer = HTTPResponseFixture.make(headers + [("Content-Length", "5"), ("ETag", "\"5d41402abc4b2a76b9719d911017c592\"")])
        let read = try S3Headers.resource(answer, bucket: "b", name: "n")
        #expect(read.contentDisposition == "inline; filename=\"é.txt\"" && read.metadata == ["owner": "ada", "emoji": "🚀"])
        #expect(read.md5Hash == "XUFAKrxLKna5cZ2REBfFkg==" && read.size == 5 && (read.generation ?? 0) > 0)
        #expect(throws: StorageFailure.self) { try S3Headers.objectHeaders(ObjectResource(metadata: ["bad key\r\n": "x"])) }
        #expect(S3ETag("\"0123456789abcdef0123456789abcdef-12\"")?.parts == 12)
        #expect(S3ETag("\"evil\r\nheader\"") == nil)
    }

    /// ETags are read on their bytes: quotes and spaces off the ends, letters, digits and `-`
    /// only, lower-cased; a digest only from 32 hex digits, a part count only from 1 to 10,000.
    @Test func etagsAreReadOnTheirBytes() {
        let upper = S3ETag(" \"5D41402ABC4B2A76B9719D911017C592\" ")
        #expect(upper?.value == "5d41402abc4b2a76b9719d911017c592" && upper?.parts == nil)
        #expect(upper?.digest == [0x5d, 0x41, 0x40, 0x2a, 0xbc, 0x4b, 0x2a, 0x76, 0xb9, 0x71, 0x9d, 0x91, 0x10, 0x17, 0xc5, 0x92])
        #expect(upper?.md5Base64 == "XUFAKrxLKna5cZ2REBfFkg==")
        let multipart = S3ETag("\"0123456789abcdef0123456789abcdef-00012\"")
        #expect(multipart?.parts == 12 && multipart?.digest?.count == 16 && multipart?.md5Base64 == nil)
        #expect(S3ETag("\"0123456789abcdef0123456789abcdef-10000\"")?.parts == 10_000)
        for noCount in ["0123456789abcdef0123456789abcdef-0", "0123456789abcdef0123456789abcdef-10001",
                        "0123456789abcdef0123456789abcdef-1x", "a-1-2", "0123456789abcdef0123456789abcdef-99999999999999999999999"] {
            #expect(S3ETag(noCount) != nil && S3ETag(noCount)?.parts == nil, "\(noCount)")
        }
        #expect(S3ETag("\"opaque-etag\"")?.digest == nil && S3ETag("\"opaque-etag\"")?.value == "opaque-etag")
        #expect(S3ETag("0123456789abcdef0123456789abcdeg")?.digest == nil)
        for refused in ["", "\"\"", "  ", "\"é\"", "a b", "a\u{0}b", "W/\"weak\"", String(repeating: "a", count: 201)] {
            #expect(S3ETag(refused) == nil, "\(refused.debugDescription)")
        }
        #expect(S3ETag(String(repeating: "a", count: 200))?.value.count == 200)
        #expect(S3ETag("\"abc\"")?.generation == S3ETag("ABC")?.generation)
    }

    @Test func errorAnswersMapToCodesAndOneSentence() {
        func failure(_ status: Int, _ code: String?, headers: [String: String] = [:], bucketLevel: Bool = false) -> StorageFailure {
            let body = code.map { "<?xml version=\"1.0\"?><Error><Code>\($0)</Code><Message>m</Message></Error>" } ?? ""
            return S3Errors.failure(HTTPResponse(status: status, headers: headers, body: Data(body.utf8)), bucket: "bkt",
                                    object: "o", bucketLevel: bucketLevel, region: "us-east-1")
        }
        let slow = failure(503, "SlowDown", headers: ["retry-after": "3"])
        #expect(slow.retryable && slow.retryAfter == 3)
        #expect(failure(500, "InternalError").retryable && failure(400, "RequestTimeout").retryable)
        #expect(!failure(501, "NotImplemented").retryable && !failure(400, "InvalidArgument").retryable)
        #expect(failure(404, "NoSuchBucket").code == .bucketNotFound && failure(404, "NoSuchKey").code == .objectNotFound)
        #expect(failure(404, nil, bucketLevel: true).code == .bucketNotFound && failure(404, nil).code == .objectNotFound)
        #expect(failure(403, "SignatureDoesNotMatch").code == .unauthenticated && failure(403, "AccessDenied").code == .unauthorized)
        #expect(failure(400, "BadDigest").code == .nonMatchingChecksum)
        let moved = failure(301, "PermanentRedirect", headers: ["x-amz-bucket-region": "eu-west-2"], bucketLevel: true)
        #expect(moved.message == "Bucket bkt is not in region us-east-1: it is in eu-west-2; set AWS_REGION=eu-west-2 or storage.region.")
        let hostile = failure(301, "Evil\r\nCode", headers: ["x-amz-bucket-region": "eu\r\nX: y"], bucketLevel: true)
        #expect(!hostile.message.contains("\r") && hostile.details["s3Code"] == nil, "\(hostile.message)")
    }
}

/// An `HTTPResponse` with the given headers, for the header-reading unit tests.
enum HTTPResponseFixture {
    static func make(_ headers: [(name: String, value: String)]) -> HTTPResponse {
        HTTPResponse(status: 200, headers: Dictionary(headers.map { ($0.name.lowercased(), $0.value) }) { $1 }, body: Data())
    }
}
