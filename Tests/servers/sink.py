#!/usr/bin/env python3
"""A webhook receiver for Hoist's tests: appends each POST body (one line) to --log, answers 204.
Prints "ready PORT"."""
import argparse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--log", required=True)
args = parser.parse_args()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *_):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(args.log, "ab") as log:
            log.write(body.replace(b"\n", b" ") + b"\n")
        self.send_response(204)
        self.end_headers()


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"ready {server.server_port}", flush=True)
server.serve_forever()
