import Foundation
import Testing
@testable import HoistStorage

/// The hand-written RFC 3339 reader and writer agree with Foundation's, on times GCS writes and
/// on random times across the years 1583 to 9999 (before 1583 Foundation counts in the Julian
/// calendar; RFC 3339 is proleptic Gregorian, and GCS writes no such times).
@Suite struct RFC3339Tests {
    let foundation = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    @Test func readsWhatGCSWrites() throws {
        for (text, seconds) in [("2026-11-23T09:10:31.123Z", 1_795_425_031.123), ("1970-01-01T00:00:00Z", 0.0),
                                ("2016-03-01T20:16:01.673Z", 1_456_863_361.673), ("2000-02-29T23:59:59.5+01:00", 951_865_199.5),
                                ("1969-12-31T23:59:59.999Z", -0.001)] {
            let date = try #require(RFC3339.date(text), "\(text)")
            #expect(abs(date.timeIntervalSince1970 - seconds) < 1e-6, "\(text)")
        }
        #expect(RFC3339.date("2026-13-01T00:00:00Z") == nil)
        #expect(RFC3339.date("yesterday") == nil)
    }

    @Test func agreesWithFoundationOnRandomTimes() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5000 {
            let millis = Int64.random(in: -12_212_553_600_000...253_402_300_799_000, using: &generator)
            let date = Date(timeIntervalSince1970: Double(millis) / 1000)
            let written = RFC3339.string(date)
            // Foundation truncates a Double that sits just below the millisecond: compare to the second.
            let expected = foundation.format(date)
            #expect(written.prefix(20) == expected.prefix(20), "\(millis)")
            #expect(written.count == 24 && written.hasSuffix("Z"), "\(written)")
            let read = try #require(RFC3339.date(written))
            #expect(abs(read.timeIntervalSince1970 - Double(millis) / 1000) < 1e-3 / 2, "\(written)")
            #expect(abs(read.timeIntervalSince1970 - (try foundation.parse(written)).timeIntervalSince1970) < 1e-4, "\(written)")
        }
    }
}
