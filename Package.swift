// swift-tools-version:6.1
import PackageDescription

// Hoist: a batch uploader for Cloud Storage with Firebase's upload API.
//
// Dependencies, and why:
// - swift-crypto: MD5 (and later RSA for service-account JWTs) from BoringSSL's
//   assembly, fast even in debug builds; Foundation on Linux has no hashing API.
// - swift-argument-parser: the `hoist` command line.
// - GRDB: the journal (SQLite in WAL mode, versioned migrations, typed records) without
//   writing a fourth C binding; it links the system's libsqlite3.
// - postgres-nio: the shared journal (`journal: postgres://...`) that workers on many machines
//   use together. It speaks PostgreSQL's wire protocol in Swift on SwiftNIO, with bind
//   parameters (no SQL built from inputs), SCRAM-SHA-256 and TLS, and a connection we can hold
//   for an advisory lock; libpq would be a fourth C binding and its blocking calls on our threads.
//   swift-nio, swift-nio-ssl and swift-log come with it; they are named because the journal
//   uses their types directly (event loops and futures, TLS contexts for sslmode=, the Logger).
let package = Package(
    name: "Hoist",
    products: [
        .library(name: "HoistStorage", targets: ["HoistStorage"]),
        .executable(name: "hoist", targets: ["hoist"]),
        .executable(name: "hoist-examples", targets: ["HoistExamples"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        // C libraries, bound through pkg-config, with shim headers for macros and varargs,
        // and CHoistChecksum: CRC32C on the CPU's crc32 instruction, which Swift cannot reach.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CLua", pkgConfig: "lua5.4", providers: [.apt(["liblua5.4-dev"])]),
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),

        .target(name: "CHoistChecksum"),
        // gzip on the system's zlib (`compress:` on a file set), behind an opaque handle: a
        // deterministic header (no time, no name, OS 255) that a pkg-config module map cannot set up.
        .target(name: "CHoistGzip", linkerSettings: [.linkedLibrary("z")]),
        // System calls the Glibc module leaves out (GNU extensions, Linux-only flags): syncfs(2)
        // for the local bucket's batched durability, getrandom(2), O_TMPFILE files linked into
        // place, and O_PATH / openat2(2) to locate a file, check it and open that very file
        // (hoist_system.h), and the version build-release links in.
        .target(name: "CHoistSystem"),
        // The HTTP engine (libcurl's multi interface), for the storage backends and Lua's http.post.
        .target(name: "HoistHTTP", dependencies: ["CCurl"]),
        .target(
            name: "HoistStorage",
            dependencies: [
                "HoistHTTP",
                "CHoistChecksum",
                "CHoistGzip",
                "CHoistSystem",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        .target(name: "HoistYAML", dependencies: ["CYAML"]),
        .target(name: "HoistLua", dependencies: ["CLua"]),
        .target(
            name: "HoistJobs",
            dependencies: [
                "HoistStorage", "HoistHTTP", "HoistYAML", "HoistLua",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "hoist",
            dependencies: [
                "HoistStorage",
                "HoistHTTP",
                "HoistJobs",
                // YAMLError (a manifest's located error) and libyaml's version for --version.
                "HoistYAML",
                // Lua's version for --version.
                "HoistLua",
                // The version scripts/package and scripts/install build in (hoist_version).
                "CHoistSystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(name: "HoistExamples", dependencies: ["HoistStorage"], path: "examples"),
        // Firebase's snippets as top-level Swift 6 code (closures inferred @MainActor), run by Swift6SnippetTests.
        .executableTarget(name: "hoist-swift6-snippets", dependencies: ["HoistStorage"], path: "Tests/swift6-snippets"),

        // Shared by the test targets: temporary folders, child processes, the real test servers.
        .target(
            name: "HoistTestSupport",
            dependencies: ["HoistStorage", "HoistHTTP", "HoistJobs", .product(name: "Crypto", package: "swift-crypto")],
            path: "Tests/HoistTestSupport"
        ),
        .testTarget(
            name: "HoistStorageTests",
            dependencies: ["HoistStorage", "HoistHTTP", "HoistTestSupport", .product(name: "Crypto", package: "swift-crypto")]
        ),
        .testTarget(name: "HoistHTTPTests", dependencies: ["HoistHTTP", "HoistTestSupport"]),
        .testTarget(name: "HoistYAMLTests", dependencies: ["HoistYAML"]),
        .testTarget(name: "HoistLuaTests", dependencies: ["HoistLua"]),
        .testTarget(name: "HoistJobsTests", dependencies: ["HoistJobs", "HoistYAML", "HoistStorage", "HoistLua", "HoistTestSupport"]),
        // The `hoist` command as a user meets it: help, exit statuses, output, the JSON events' schema.
        .testTarget(name: "HoistCommandTests", dependencies: ["HoistJobs", "HoistTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
