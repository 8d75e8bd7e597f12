#!/usr/bin/env python3
"""An OAuth token endpoint for Hoist's tests: checks a service account's RS256 JWT assertion
against the public key and answers an access token. Prints "ready PORT"; logs to --log."""
import argparse
import base64
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--public-key", required=True)
    parser.add_argument("--email", required=True)
    parser.add_argument("--expires-in", type=int, default=3600)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    public_key = serialization.load_pem_public_key(open(args.public_key, "rb").read())
    issued = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_):
            pass

        def reply(self, status, payload):
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            try:
                assert form["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"], "grant_type"
                header_b64, claims_b64, signature_b64 = form["assertion"][0].split(".")
                public_key.verify(b64url_decode(signature_b64), f"{header_b64}.{claims_b64}".encode(),
                                  padding.PKCS1v15(), hashes.SHA256())
                header = json.loads(b64url_decode(header_b64))
                claims = json.loads(b64url_decode(claims_b64))
                assert header["alg"] == "RS256", "alg"
                assert claims["iss"] == args.email, "iss"
                assert claims["aud"] == f"http://127.0.0.1:{self.server.server_port}/token", "aud"
                assert "devstorage" in claims["scope"], "scope"
                assert claims["exp"] - claims["iat"] == 3600 and abs(claims["iat"] - time.time()) < 60, "times"
            except Exception as error:  # any failure is the client's
                with open(args.log, "a") as log:
                    log.write(json.dumps({"rejected": str(error)}) + "\n")
                return self.reply(400, {"error": "invalid_grant", "error_description": str(error)})
            token = f"token-{len(issued) + 1}"
            issued.append(token)
            with open(args.log, "a") as log:
                log.write(json.dumps({"issued": token}) + "\n")
            self.reply(200, {"access_token": token, "expires_in": args.expires_in, "token_type": "Bearer"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"ready {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
