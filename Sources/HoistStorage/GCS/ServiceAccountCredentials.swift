import Crypto
import CryptoExtras
import Foundation
import HoistHTTP
import Synchronization

/// A Google service account's key file: an RS256-signed JWT exchanged for an access token at
/// the key's `token_uri`, cached and refreshed five minutes before it expires.
public final class ServiceAccountCredentials: AccessTokenProvider {
    struct Key: Decodable {
        let type: String?
        let client_email: String
        let private_key: String
        let private_key_id: String?
        let token_uri: String?
    }

    private let email: String
    private let keyID: String?
    private let signingKey: _RSA.Signing.PrivateKey
    /// Where tokens come from (the key's `token_uri`, or Google's).
    public let tokenURI: String
    public let scope: String
    /// The CA bundle to trust at the token endpoint (nil: the system store).
    public let caBundle: String?
    /// What sends the token requests.
    private let transport: any HTTPTransport
    private let cached = Mutex<(token: String, expires: Date)?>(nil)

    /// Reads a key file. - Throws: `unauthenticated` naming the file and what is wrong (never the key).
    public convenience init(keyFile: String, scope: String = "https://www.googleapis.com/auth/devstorage.read_write",
                            caBundle: String? = nil, transport: any HTTPTransport = HTTPTransports.standard) throws {
        guard let data = FileManager.default.contents(atPath: keyFile) else {
            throw StorageFailure(.unauthenticated, "Cannot read the credentials file \(keyFile).")
        }
        try self.init(keyJSON: data, source: keyFile, scope: scope, caBundle: caBundle, transport: transport)
    }

    /// Reads a key file's contents; `source` names it in errors.
    public init(keyJSON: Data, source: String = "service account key",
                scope: String = "https://www.googleapis.com/auth/devstorage.read_write", caBundle: String? = nil,
                transport: any HTTPTransport = HTTPTransports.standard) throws {
        let key: Key
        do {
            key = try JSONDecoder().decode(Key.self, from: keyJSON)
        } catch {
            throw StorageFailure(.unauthenticated, "\(source) is not a service account key: it needs client_email and private_key.")
        }
        if let type = key.type, type != "service_account" {
            throw StorageFailure(.unauthenticated, "\(source) is a '\(type)' credential, not a service account key.")
        }
        do {
            signingKey = try _RSA.Signing.PrivateKey(pemRepresentation: key.private_key)
        } catch {
            throw StorageFailure(.unauthenticated, "\(source): its private_key is not a usable RSA key.")
        }
        email = key.client_email
        keyID = key.private_key_id
        tokenURI = key.token_uri ?? "https://oauth2.googleapis.com/token"
        self.scope = scope
        self.caBundle = caBundle
        self.transport = transport
    }

    public func accessToken() async throws -> String? {
        if let current = cached.withLock({ $0 }), current.expires.timeIntervalSinceNow > 300 { return current.token }
        let issued = Date()
        let response: HTTPResponse
        do {
            var request = HTTPRequest(method: "POST", url: tokenURI,
                                      headers: [("Content-Type", "application/x-www-form-urlencoded")])
            let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + (try assertion(at: issued))
            request.body = [.data(Data(form.utf8))]
            request.stallTimeout = 30
            request.caBundle = caBundle
            response = try await transport.perform(request)
        } catch let error as HTTPTransportError {
            throw StorageFailure(.unauthenticated, "Cannot reach the token endpoint \(tokenURI): \(error.message)",
                                 retryable: error.isTransient, noAnswer: true)
        }
        struct Answer: Decodable {
            let access_token: String?
            let expires_in: Double?
            let error: String?
        }
        let answer = try? JSONDecoder().decode(Answer.self, from: response.body)
        guard response.status == 200, let token = answer?.access_token else {
            let reason = answer?.error.map { ": \(printable($0, limit: outsideTextLimit))" } ?? ""
            throw StorageFailure(
                .unauthenticated, "The token endpoint \(tokenURI) refused the service account \(email) (HTTP \(response.status)\(reason)).",
                retryable: response.status >= 500 || response.status == 429, httpStatus: response.status)
        }
        cached.withLock { $0 = (token, issued.addingTimeInterval(answer?.expires_in ?? 3600)) }
        return token
    }

    /// The signed JWT: `header.claims.signature`, each base64url.
    func assertion(at issued: Date) throws -> String {
        var header = ["alg": "RS256", "typ": "JWT"]
        if let keyID { header["kid"] = keyID }
        let now = Int(issued.timeIntervalSince1970)
        let claims: [String: any Sendable] = ["iss": email, "scope": scope, "aud": tokenURI, "iat": now, "exp": now + 3600]
        let signingInput = Self.base64URL(try JSONSerialization.data(withJSONObject: header, options: .sortedKeys)) + "."
            + Self.base64URL(try JSONSerialization.data(withJSONObject: claims, options: .sortedKeys))
        let signature = try signingKey.signature(for: Data(signingInput.utf8), padding: .insecurePKCS1v1_5)
        return signingInput + "." + Self.base64URL(signature.rawRepresentation)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
