import Foundation
import HoistTestSupport
import Testing
@testable import HoistStorage

@Suite struct ContentTypeTests {
    @Test(arguments: [
        ("index.html", "text/html"), ("style.CSS", "text/css"), ("app.js", "text/javascript"),
        ("data.json", "application/json"), ("photo.JPG", "image/jpeg"), ("a/b/c.jpeg", "image/jpeg"),
        ("logo.png", "image/png"), ("anim.gif", "image/gif"), ("pic.webp", "image/webp"), ("icon.svg", "image/svg+xml"),
        ("song.mp3", "audio/mpeg"), ("voice.m4a", "audio/mp4"), ("sound.wav", "audio/wav"), ("track.flac", "audio/flac"),
        ("movie.mp4", "video/mp4"), ("clip.mov", "video/quicktime"), ("stream.webm", "video/webm"),
        ("doc.pdf", "application/pdf"), ("notes.txt", "text/plain"), ("sheet.csv", "text/csv"),
        ("report.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        ("archive.zip", "application/zip"), ("backup.tar.gz", "application/gzip"), ("logs.tar", "application/x-tar"),
        ("font.woff2", "font/woff2"), ("module.wasm", "application/wasm"),
        ("/srv/x.y/Photo.PnG", "image/png"), ("a/b.txt/", "text/plain"), ("a.b.c.md", "text/markdown"),
    ])
    func knownExtensions(path: String, type: String) {
        #expect(ContentType.forPath(path) == type)
    }

    @Test(arguments: ["README", "archive.unknownext", ".bashrc", "dir.d/noext", "trailingdot.", "a/.bashrc", "/", "", "x.json/.hidden"])
    func unknownExtensions(path: String) {
        #expect(ContentType.forPath(path) == nil)
    }
}
