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
    ],
    targets: [
        // C libraries, bound through pkg-config, with shim headers for macros and varargs,
        // and CHoistChecksum: CRC32C on the CPU's crc32 instruction, which Swift cannot reach.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CLua", pkgConfig: "lua5.4", providers: [.apt(["liblua5.4-dev"])]),
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),

        .target(name: "CHoistChecksum"),
        // syncfs(2), a GNU extension the Glibc module leaves out: the local bucket's batched durability.
        .target(name: "CHoistSystem"),
        // The HTTP engine (libcurl's multi interface), for the storage backends and Lua's http.post.
        .target(name: "HoistHTTP", dependencies: ["CCurl"]),
        .target(
            name: "HoistStorage",
            dependencies: [
                "HoistHTTP",
                "CHoistChecksum",
                "CHoistSystem",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        .target(name: "HoistYAML", dependencies: ["CYAML"]),
        .target(name: "HoistLua", dependencies: ["CLua"]),
        .target(
            name: "HoistJobs",
            dependencies: ["HoistStorage", "HoistHTTP", "HoistYAML", "HoistLua", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .executableTarget(
            name: "hoist",
            dependencies: [
                "HoistStorage",
                "HoistHTTP",
                "HoistJobs",
                // YAMLError (a manifest's located error) and libyaml's version for --version.
                "HoistYAML",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(name: "HoistExamples", dependencies: ["HoistStorage"], path: "examples"),

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
        .testTarget(name: "HoistYAMLTests", dependencies: ["HoistYAML"]),
        .testTarget(name: "HoistLuaTests", dependencies: ["HoistLua"]),
        .testTarget(name: "HoistJobsTests", dependencies: ["HoistJobs", "HoistYAML", "HoistStorage", "HoistLua", "HoistTestSupport"]),
        // The `hoist` command as a user meets it: help, exit statuses, output, the JSON events' schema.
        .testTarget(name: "HoistCommandTests", dependencies: ["HoistJobs", "HoistTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
