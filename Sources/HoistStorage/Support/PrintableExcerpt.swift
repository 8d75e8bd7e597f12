/// A server's or a user's text for an error message: its first 60 characters, each one that is
/// not printable ASCII as `?` (a header, an XML message or a name a message quotes).
func printableExcerpt(_ text: String) -> String {
    String(text.unicodeScalars.prefix(60).map { (0x20..<0x7F).contains($0.value) ? Character($0) : "?" })
}
