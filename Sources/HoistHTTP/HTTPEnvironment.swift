import Foundation

/// The files the HTTP engine reads because the environment names them: curl's CA bundle
/// variables (read as curl's own tool reads them) and OpenSSL's, which libcurl's TLS loads when
/// it starts (`OPENSSL_CONF` may load a provider: code). Declared here once, for
/// `HTTPRequest.caBundle(fromEnvironment:)` and for the check that a job's hooks cannot write
/// where a run reads.
public enum HTTPEnvironment {
    /// The variables curl takes a CA bundle from, first set first: `CURL_CA_BUNDLE`, else
    /// `SSL_CERT_FILE` (OpenSSL's name, which Python and Go tools also honour), else
    /// `SSL_CERT_DIR` (OpenSSL's folder of hashed certificates).
    public static let caBundleVariables = ["CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"]

    /// What OpenSSL reads at start when these are set: its configuration, and the folders it loads
    /// providers and engines from.
    public static let openSSLVariables = ["OPENSSL_CONF", "OPENSSL_CONF_INCLUDE", "OPENSSL_MODULES", "OPENSSL_ENGINES"]

    /// What the libraries libcurl links read when these are set: SASL's plugin folders, Kerberos'
    /// configuration, LDAP's (libcurl's build here links both).
    public static let linkedLibraryVariables = ["SASL_PATH", "SASL_CONF_PATH", "KRB5_CONFIG", "KRB5CCNAME", "LDAPCONF", "LDAPRC"]

    /// Each file or folder the environment names for the HTTP engine: the variable and its path
    /// (absolute, as given; each part of a `:`-separated list, as OpenSSL takes `SSL_CERT_DIR`).
    /// Each may be read whole (a folder of certificates, of modules).
    public static func reads(in environment: [String: String]) -> [(variable: String, path: String)] {
        (caBundleVariables + openSSLVariables + linkedLibraryVariables).flatMap { name in
            (environment[name] ?? "").split(separator: ":").map { (name, URL(fileURLWithPath: String($0)).path) }
        }
    }
}
