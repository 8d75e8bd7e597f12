#!/usr/bin/env python3
"""A hostile HTTP server for Hoist's sandbox tests. Prints "ready PORT".

POST /big?bytes=N        answers 200 with N bytes of "x" (sent in 1 MiB pieces)
POST /drip               answers 200 and then sends one byte every 2 s, forever
POST /headers            answers 200 and then sends headers, forever
POST /redirect?to=URL    answers 302 with Location: URL
anything else            answers 200 "ok"
"""
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        if length:
            self.rfile.read(length)
        url = urlparse(self.path)
        query = parse_qs(url.query)
        try:
            if url.path == "/big":
                total = int(query["bytes"][0])
                self.send_response(200)
                self.send_header("Content-Length", str(total))
                self.end_headers()
                piece = b"x" * (1 << 20)
                while total > 0:
                    self.wfile.write(piece[: min(total, len(piece))])
                    total -= len(piece)
            elif url.path == "/drip":
                self.send_response(200)
                self.send_header("Content-Length", "1000000")
                self.end_headers()
                while True:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(2)
            elif url.path == "/headers":
                self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                n = 0
                while True:
                    self.wfile.write(b"X-Flood-%d: %s\r\n" % (n, b"y" * 1000))
                    n += 1
            elif url.path == "/redirect":
                self.send_response(302)
                self.send_header("Location", query["to"][0])
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
        except (BrokenPipeError, ConnectionResetError):
            pass


ThreadingHTTPServer.daemon_threads = True
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"ready {server.server_port}", flush=True)
server.serve_forever()
