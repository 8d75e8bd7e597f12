import Foundation
import HoistHTTP
import Synchronization

/// Credentials for a web identity, as pods on EKS get them: the token in `tokenFile` (which the
/// platform rewrites as it rotates it) exchanged at STS (`AssumeRoleWithWebIdentity`, an
/// unsigned request) for temporary keys of `roleARN`, taken again `refreshBefore` seconds
/// before they expire.
public struct S3WebIdentity: Sendable, Equatable {
    public var tokenFile: String
    public var roleARN: String
    public var sessionName: String
    /// `https://sts.REGION.amazonaws.com`, or `AWS_ENDPOINT_URL_STS`'s.
    public var stsEndpoint: String
    public var refreshBefore: TimeInterval = 300

    public init(tokenFile: String, roleARN: String, sessionName: String, stsEndpoint: String) {
        self.tokenFile = tokenFile
        self.roleARN = roleARN
        self.sessionName = sessionName
        self.stsEndpoint = stsEndpoint.hasSuffix("/") ? String(stsEndpoint.dropLast()) : stsEndpoint
    }

    /// From `AWS_WEB_IDENTITY_TOKEN_FILE`, `AWS_ROLE_ARN` and `AWS_ROLE_SESSION_NAME`, checked; nil
    /// when the first two are not both set.
    static func fromEnvironment(_ env: (String) -> String?, region: String) throws -> S3WebIdentity? {
        guard let file = env("AWS_WEB_IDENTITY_TOKEN_FILE"), let role = env("AWS_ROLE_ARN") else { return nil }
        let validRole = role.count <= 2048 && role.hasPrefix("arn:aws") && role.contains(":role/")
            && role.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || ":/+=,.@_-".contains($0)) }
        guard validRole else {
            throw StorageFailure(.invalidArgument, "AWS_ROLE_ARN '\(printable(role, limit: 60))' is not a role's ARN (arn:aws:iam::ACCOUNT:role/NAME).")
        }
        let session = env("AWS_ROLE_SESSION_NAME") ?? "hoist-\(RandomID.lowercased().prefix(12))"
        guard (2...64).contains(session.count), session.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "=,.@_-".contains($0)) }) else {
            throw StorageFailure(.invalidArgument, "AWS_ROLE_SESSION_NAME '\(printable(session, limit: 60))' is not a session name (2 to 64 of letters, digits and =,.@_-).")
        }
        let sts = env("AWS_ENDPOINT_URL_STS") ?? env("AWS_ENDPOINT_URL") ?? "https://sts.\(region).amazonaws.com"
        try S3Values.checkEndpoint(sts)
        return S3WebIdentity(tokenFile: file, roleARN: role, sessionName: session, stsEndpoint: sts)
    }
}

/// The credentials requests are signed with: fixed ones, or a web identity's, fetched when
/// first needed and again before they expire.
final class S3CredentialSource: Sendable {
    private let fixed: S3Credentials?
    private let webIdentity: S3WebIdentity?
    private let caBundle: String?
    private let transport: any HTTPTransport
    private let cached = Mutex<(credentials: S3Credentials, expires: Date)?>(nil)

    init(_ configuration: S3Backend.Configuration) {
        fixed = configuration.anonymous ? nil : configuration.credentials
        webIdentity = configuration.anonymous ? nil : configuration.webIdentity
        caBundle = configuration.caBundle
        transport = configuration.transport
    }

    var isEmpty: Bool { fixed == nil && webIdentity == nil }

    func credentials() async throws -> S3Credentials? {
        guard let webIdentity else { return fixed }
        if let (credentials, expires) = cached.withLock({ $0 }), Date().addingTimeInterval(webIdentity.refreshBefore) < expires {
            return credentials
        }
        let fresh = try await assumeRole(webIdentity)
        cached.withLock { $0 = fresh }
        return fresh.credentials
    }

    /// `AssumeRoleWithWebIdentity` with the token file's current token.
    private func assumeRole(_ identity: S3WebIdentity) async throws -> (credentials: S3Credentials, expires: Date) {
        let token = try Self.readToken(identity.tokenFile)
        let form = [("Action", "AssumeRoleWithWebIdentity"), ("Version", "2011-06-15"), ("RoleArn", identity.roleARN),
                    ("RoleSessionName", identity.sessionName), ("WebIdentityToken", token)]
            .map { "\($0.0)=\(SigV4.encode($0.1))" }.joined(separator: "&")
        var request = HTTPRequest(method: "POST", url: identity.stsEndpoint + "/",
                                  headers: [("Content-Type", "application/x-www-form-urlencoded")], body: [.data(Data(form.utf8))])
        request.caBundle = caBundle
        request.connectTimeout = 5
        request.stallTimeout = 15
        let response: HTTPResponse
        do {
            response = try await transport.perform(request)
        } catch let error as HTTPTransportError {
            throw StorageFailure(.unauthenticated, "Cannot reach STS at \(identity.stsEndpoint) to exchange the web identity token "
                                    + "(\(error.message)).", retryable: error.isTransient, noAnswer: true)
        }
        let xml = try? S3XML(response.body)
        let result = "*/AssumeRoleWithWebIdentityResult/Credentials/"
        guard response.status == 200, let xml, let key = xml.first(result + "AccessKeyId"), let secret = xml.first(result + "SecretAccessKey"),
              let session = xml.first(result + "SessionToken"), let expiration = xml.first(result + "Expiration").flatMap(Self.date)
        else {
            let code = (xml?.first("*/Error/Code") ?? xml?.first("Error/Code")).flatMap { S3Errors.token($0, max: 64) }
            throw StorageFailure(.unauthenticated, "STS at \(identity.stsEndpoint) refused the web identity token of "
                                    + "\(identity.tokenFile) for \(identity.roleARN) (\(code ?? "HTTP \(response.status)")).",
                                 retryable: response.status >= 500, httpStatus: response.status)
        }
        let credentials = S3Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: session)
        try S3Values.checkCredentials(credentials)
        return (credentials, expiration)
    }

    /// The token file's text, trimmed: at most 16 KiB of printable ASCII (a JWT).
    static func readToken(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path), data.count <= 16 << 10 else {
            throw StorageFailure(.unauthenticated, "Cannot read the web identity token file \(path) (or it is over 16 KiB): "
                                    + "check AWS_WEB_IDENTITY_TOKEN_FILE.")
        }
        let token = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty, token.unicodeScalars.allSatisfy({ (0x21..<0x7F).contains($0.value) }) else {
            throw StorageFailure(.unauthenticated, "The web identity token file \(path) does not hold a token.")
        }
        return token
    }

    /// STS's `Expiration`: ISO 8601, with or without fractions of a second.
    static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}
