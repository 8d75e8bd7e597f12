import Foundation
import HoistTestSupport
import Testing
@testable import HoistStorage

/// Credentials: a bearer token from the environment, and a service-account key exchanged at a
/// token endpoint the test runs; the fault proxy refuses requests without the right token.
@Suite struct AuthTests {
    @Test func bearerTokenFromTheEnvironment() async throws {
        let credentials = try credentialsFromEnvironment(["GOOGLE_OAUTH_ACCESS_TOKEN": "env-token"])
        #expect(try await credentials.accessToken() == "env-token")
        // The emulator wins: no credentials at all.
        let emulator = try credentialsFromEnvironment(["STORAGE_EMULATOR_HOST": "x:1", "HOIST_ACCESS_TOKEN": "t"])
        #expect(try await emulator.accessToken() == nil)

        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--require-bearer", "env-token"])
        let storage = gcsStorage(bucket: bucket, port: proxy.port) { $0.credentials = credentials }
        _ = try await storage.reference(withPath: "authed").putDataAsync(Data("x".utf8))
        #expect(proxy.requests.allSatisfy { $0["bearer"] as? Bool == true })

        let anonymous = gcsStorage(bucket: bucket, port: proxy.port)
        await #expect { try await anonymous.reference(withPath: "anon").putDataAsync(Data("x".utf8)) } throws: { error in
            (error as NSError).code == StorageErrorCode.unauthenticated.rawValue
        }
    }

    /// A fresh RSA key, a key file naming the test's token endpoint, and the endpoint itself.
    struct ServiceAccount {
        let directory: TemporaryDirectory
        let keyFile: URL
        let tokenServer: ServerProcess
        let tokenLog: URL
        let privateKeyPEM: String

        init() throws {
            directory = try TemporaryDirectory()
            let keyPath = directory.url.appendingPathComponent("key.pem").path
            let publicPath = directory.url.appendingPathComponent("public.pem").path
            _ = try python("""
                from cryptography.hazmat.primitives.asymmetric import rsa
                from cryptography.hazmat.primitives import serialization
                key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
                open('\(keyPath)', 'wb').write(key.private_bytes(serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
                open('\(publicPath)', 'wb').write(key.public_key().public_bytes(serialization.Encoding.PEM,
                    serialization.PublicFormat.SubjectPublicKeyInfo))
                """)
            privateKeyPEM = try String(contentsOfFile: keyPath, encoding: .utf8)
            tokenLog = directory.url.appendingPathComponent("tokens.log")
            let script = packageRoot.appendingPathComponent("Tests/servers/tokenserver.py").path
            tokenServer = try ServerProcess(testPython, testPythonArguments + [
                script, "--public-key", publicPath, "--email", "hoist@test.iam.gserviceaccount.com", "--log", tokenLog.path,
            ])
            let port = try tokenServer.readyPort()
            keyFile = directory.url.appendingPathComponent("service-account.json")
            let key: [String: String] = [
                "type": "service_account", "client_email": "hoist@test.iam.gserviceaccount.com",
                "private_key": privateKeyPEM, "private_key_id": "k1", "token_uri": "http://127.0.0.1:\(port)/token",
            ]
            try JSONSerialization.data(withJSONObject: key).write(to: keyFile)
        }

        var issued: [String] {
            ((try? String(contentsOf: tokenLog, encoding: .utf8)) ?? "").split(separator: "\n")
                .compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String])?["issued"] }
        }
    }

    @Test func serviceAccountKeyIsExchangedForACachedToken() async throws {
        let account = try ServiceAccount()
        let credentials = try credentialsFromEnvironment(["GOOGLE_APPLICATION_CREDENTIALS": account.keyFile.path])
        let bucket = try await FakeGCS.makeBucket()
        let proxy = try FaultProxy(upstreamPort: try FakeGCS.port(), ["--require-bearer", "token-1"])
        let storage = gcsStorage(bucket: bucket, port: proxy.port) { $0.credentials = credentials }
        for name in ["a", "b", "c"] {
            _ = try await storage.reference(withPath: name).putDataAsync(Data(name.utf8))
        }
        // The endpoint checked the JWT's RS256 signature and claims, and issued one token for all three.
        #expect(account.issued == ["token-1"])
        #expect(try await FakeGCS.download(bucket: bucket, object: "c") == Data("c".utf8))
    }

    @Test func badKeysFailClearlyWithoutTheSecret() throws {
        let directory = try TemporaryDirectory()
        let notAKey = try directory.write("bad.json", Data(#"{"type":"service_account","client_email":"a@b","private_key":"-----BEGIN PRIVATE KEY-----\nSECRETSECRET\n-----END PRIVATE KEY-----\n"}"#.utf8))
        #expect { try ServiceAccountCredentials(keyFile: notAKey.path) } throws: { error in
            let text = (error as NSError).localizedDescription
            return (error as NSError).code == StorageErrorCode.unauthenticated.rawValue
                && text.contains("bad.json") && !text.contains("SECRET")
        }
        let user = try directory.write("user.json", Data(#"{"type":"authorized_user","client_email":"a","private_key":"x"}"#.utf8))
        #expect { try ServiceAccountCredentials(keyFile: user.path) } throws: { error in
            (error as NSError).localizedDescription.contains("'authorized_user' credential")
        }
        #expect { try ServiceAccountCredentials(keyFile: directory.url.appendingPathComponent("none.json").path) } throws: { error in
            (error as NSError).localizedDescription.contains("Cannot read the credentials file")
        }
    }

    @Test func refusedAssertionIsUnauthenticated() async throws {
        let account = try ServiceAccount()
        // Same endpoint, but the key file names another account: the endpoint refuses the JWT.
        var key = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: account.keyFile)) as? [String: String])
        key["client_email"] = "intruder@test.iam.gserviceaccount.com"
        let credentials = try ServiceAccountCredentials(keyJSON: try JSONSerialization.data(withJSONObject: key))
        await #expect { try await credentials.accessToken() } throws: { error in
            let text = (error as NSError).localizedDescription
            return (error as NSError).code == StorageErrorCode.unauthenticated.rawValue
                && text.contains("refused the service account intruder@test.iam.gserviceaccount.com (HTTP 400: invalid_grant)")
                && !text.contains("PRIVATE KEY")
        }
    }
}
