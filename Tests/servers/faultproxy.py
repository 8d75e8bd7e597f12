#!/usr/bin/env python3
"""A fault-injecting HTTP proxy for Hoist's tests, in front of a real storage server.

Each connection carries one request: the proxy forwards it upstream (Connection: close),
relays the answer, rewrites upload-session Location headers to point back at itself, and
closes. Faults, each for a limited number of matching requests:

  --fail STATUS:COUNT[:METHOD]   answer STATUS instead of forwarding (with --retry-after SECONDS);
                                 its body is GCS's JSON error, or S3's XML one with --fail-xml, and
                                 says --fail-message TEXT (default "injected")
  --cut-after BYTES:COUNT[:METHOD]  forward BYTES of the body, then drop both connections
  --corrupt-at BYTES[:METHOD[:COUNT]]  flip one bit of the body byte at that offset (once, or COUNT times)
  --stall SECONDS:COUNT[:METHOD] wait before forwarding
  --require-bearer TOKEN         answer 401 unless "Authorization: Bearer TOKEN"
  --reset COUNT[:METHOD]         read the request, then reset the connection (TCP RST), no answer
  --keep-alive                   keep the client's connection open after injected answers, so the
                                 next request arrives on a reused connection (as a pool reuses it)
  --listing repeat|endless       rewrite S3 ListObjectsV2 answers (GET ?list-type=2): `repeat` gives
                                 each listed key ten times; `endless` says every page is truncated,
                                 with the same NextContinuationToken each time (the token is taken
                                 off the request before it goes upstream)
  --sse-kms                      play an S3 bucket with default SSE-KMS encryption: every ETag answered
                                 (PutObject, UploadPart, Complete, HEAD, listings) is replaced by one
                                 that is no MD5 of the bytes (a hash of the real one, so each object
                                 keeps one), with `x-amz-server-side-encryption: aws:kms`; the part
                                 ETags of a Complete request are mapped back before it goes upstream
  --complete-checksum right|wrong  answer CompleteMultipartUpload as AWS does for a FULL_OBJECT upload:
                                 with <ChecksumCRC32C> (the request's `x-amz-checksum-crc32c`, or it
                                 with one bit flipped; `AAAAAA==` when the request had none) and
                                 <ChecksumType>FULL_OBJECT</ChecksumType>
  --preflight all-buckets        answer S3's pre-flight `GET /BUCKET?list-type=2&max-keys=1` with the list
                                 of all buckets (ListAllMyBucketsResult), as radosgw without
                                 `rgw dns name` answers a virtual-host request

It prints "ready PORT" once listening, and logs one JSON line per request to --log.
"""
import argparse
import asyncio
import base64
import hashlib
import json
import re
import socket
import struct
import sys
import time


class Rule:
    def __init__(self, spec, default_method=None):
        parts = spec.split(":")
        self.value = parts[0]
        self.count = int(parts[1]) if len(parts) > 1 and parts[1] else 1
        self.method = (parts[2] or None) if len(parts) > 2 else default_method

    def take(self, method):
        if self.count <= 0 or (self.method and self.method != method):
            return False
        self.count -= 1
        return True


async def read_head(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = lines[0].split(" ", 2)
    headers = []
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
    return method, target, headers


def corrupt_rule(spec):
    """BYTES[:METHOD[:COUNT]] as a Rule's VALUE:COUNT:METHOD."""
    parts = spec.split(":")
    return f"{parts[0]}:{parts[2] if len(parts) > 2 else 1}:{parts[1] if len(parts) > 1 else ''}"


def header(headers, name):
    for key, value in headers:
        if key.lower() == name.lower():
            return value
    return None


def rewrite_listing(body, mode):
    """A ListObjectsV2 answer made hostile: keys repeated, or a listing that never ends."""
    text = body.decode("utf-8")
    if mode == "repeat":
        text = re.sub(r"(<Contents>.*?</Contents>)", lambda m: m.group(1) * 10, text, flags=re.S)
    elif mode == "endless":
        text = re.sub(r"<IsTruncated>[^<]*</IsTruncated>", "<IsTruncated>true</IsTruncated>", text)
        text = re.sub(r"<NextContinuationToken>[^<]*</NextContinuationToken>", "", text)
        text = text.replace("</IsTruncated>", "</IsTruncated><NextContinuationToken>again</NextContinuationToken>", 1)
    return text.encode("utf-8")


def dechunk(body):
    """A chunked body's bytes (Transfer-Encoding: chunked), trailers dropped."""
    out, rest = bytearray(), body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        rest = rest[size + 2:]
    return bytes(out)


def kms_etag(real):
    """An SSE-KMS bucket's ETag for an object whose real ETag is `real`: 32 hex digits that are
    no MD5 of its bytes (the part count kept), the same each time."""
    digits, dash, count = real.partition("-")
    return hashlib.md5(("kms:" + digits).encode()).hexdigest() + dash + count


ALL_BUCKETS = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListAllMyBucketsResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
               "<Owner><ID>hoist</ID><DisplayName>hoist</DisplayName></Owner><Buckets><Bucket><Name>127.0.0.1</Name>"
               "<CreationDate>2026-01-01T00:00:00.000Z</CreationDate></Bucket></Buckets></ListAllMyBucketsResult>")


class Proxy:
    def __init__(self, args):
        self.args = args
        self.upstream_host, self.upstream_port = args.upstream.rsplit(":", 1)
        self.fails = [Rule(spec) for spec in args.fail]
        self.cuts = [Rule(spec, "PUT") for spec in args.cut_after]
        self.corrupts = [Rule(corrupt_rule(spec)) for spec in args.corrupt_at]
        self.stalls = [Rule(spec) for spec in args.stall]
        self.resets = [Rule("reset:" + spec) for spec in args.reset]
        self.log = open(args.log, "a", buffering=1) if args.log else None
        self.port = None
        self.real_etags = {}  # --sse-kms: the ETag given out -> the server's

    def record(self, **fields):
        fields["time"] = time.monotonic()
        if self.log:
            self.log.write(json.dumps(fields) + "\n")

    async def handle(self, reader, writer):
        try:
            reused = False
            # serve() answers True when the connection stays open for another request.
            while await self.serve(reader, writer, reused):
                reused = True
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def serve(self, reader, writer, reused):
        method, target, headers = await read_head(reader)
        length = int(header(headers, "Content-Length") or 0)
        auth = header(headers, "Authorization")
        self.record(method=method, target=target, contentRange=header(headers, "Content-Range"),
                    contentType=header(headers, "Content-Type"), length=length,
                    bearer=(auth or "").startswith("Bearer "), reused=reused,
                    checksumCRC32C=header(headers, "x-amz-checksum-crc32c"),
                    checksumAlgorithm=header(headers, "x-amz-checksum-algorithm"),
                    checksumType=header(headers, "x-amz-checksum-type"))
        if self.args.preflight and method == "GET" and "list-type=2" in target and "max-keys=1" in target:
            await reader.readexactly(length)
            return await self.answer(writer, 200, None, body=ALL_BUCKETS.encode(), content_type="application/xml")

        if self.args.require_bearer and auth != "Bearer " + self.args.require_bearer:
            await reader.readexactly(length)
            return await self.answer(writer, 401, {"error": {"code": 401, "message": "Invalid Credentials"}})
        for rule in self.fails:
            if rule.take(method):
                await reader.readexactly(length)
                extra = [("Retry-After", self.args.retry_after)] if self.args.retry_after else []
                message = self.args.fail_message
                if self.args.fail_xml:
                    return await self.answer_xml(writer, int(rule.value), message)
                return await self.answer(writer, int(rule.value), {"error": {"code": int(rule.value), "message": message}}, extra)
        for rule in self.resets:
            if rule.take(method):
                await reader.readexactly(length)
                self.record(event="reset", method=method, target=target, reused=reused)
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
                return False
        for rule in self.stalls:
            if rule.take(method):
                await asyncio.sleep(float(rule.value))

        cut = next((int(r.value) for r in self.cuts if length > int(r.value) and r.take(method)), None)
        corrupt = next((int(r.value) for r in self.corrupts if length > int(r.value) and r.take(method)), None)

        listing = self.args.listing if method == "GET" and "list-type=2" in target else None
        complete = method == "POST" and "uploadId=" in target
        if listing == "endless":
            target = re.sub(r"&?continuation-token=[^&]*", "", target).replace("?&", "?")

        up_reader, up_writer = await asyncio.open_connection(self.upstream_host, int(self.upstream_port))
        lines = [f"{method} {target} HTTP/1.1"]
        for name, value in headers:
            if name.lower() not in ("connection", "keep-alive"):
                lines.append(f"{name}: {value}")
        lines.append("Connection: close")
        up_writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

        sent = 0
        if complete and self.args.sse_kms and length:
            # The part ETags given out, back to the server's (the same length: 32 hex digits).
            text = (await reader.readexactly(length)).decode("utf-8")
            for fake, real in self.real_etags.items():
                text = text.replace(fake, real)
            up_writer.write(text.encode("utf-8"))
            await up_writer.drain()
            sent = length
        while sent < length:
            piece = await reader.read(min(1 << 16, length - sent))
            if not piece:
                # The client went away mid-body: cut the server off too, so it keeps what it got.
                self.record(event="partial", method=method, target=target, forwarded=sent)
                up_writer.transport.abort()
                return
            if corrupt is not None and sent <= corrupt < sent + len(piece):
                at = corrupt - sent
                piece = piece[:at] + bytes([piece[at] ^ 0x01]) + piece[at + 1:]
            if cut is not None and sent + len(piece) >= cut:
                up_writer.write(piece[:cut - sent])
                await up_writer.drain()
                await asyncio.sleep(0.2)  # let the server take what it got
                self.record(event="cut", method=method, target=target, after=cut)
                up_writer.transport.abort()
                writer.transport.abort()
                return
            up_writer.write(piece)
            await up_writer.drain()
            sent += len(piece)

        response = await up_reader.read()
        up_writer.close()
        head, _, body = response.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        answer_range = next((l.split(":", 1)[1].strip() for l in header_lines if l.lower().startswith("range:")), None)
        self.record(event="answer", method=method, target=target, contentRange=header(headers, "Content-Range"),
                    forwarded=sent, status=int(status_line.split(" ")[1]) if " " in status_line else 0, range=answer_range)
        upstream = f"http://{self.upstream_host}:{self.upstream_port}".encode()
        mine = f"http://127.0.0.1:{self.port}".encode()
        head = head.replace(upstream, mine)
        status = int(status_line.split(" ")[1]) if " " in status_line else 0
        rewrite = bool(listing) or (status == 200 and (self.args.sse_kms or (complete and self.args.complete_checksum)))
        if rewrite and any(l.lower().startswith("transfer-encoding:") and "chunked" in l.lower() for l in header_lines):
            body = dechunk(body)
        if listing:
            body = rewrite_listing(body, listing)
        extra = []
        if status == 200 and self.args.sse_kms:
            head, body = self.as_kms(head, body)
            extra.append(b"x-amz-server-side-encryption: aws:kms")
        if status == 200 and complete and self.args.complete_checksum:
            body = self.with_full_checksum(body, header(headers, "x-amz-checksum-crc32c"))
        out = []
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"connection:"):
                continue
            if rewrite and (line.lower().startswith(b"content-length:") or line.lower().startswith(b"transfer-encoding:")):
                continue
            out.append(line)
        out += extra
        if rewrite and method != "HEAD":
            out.append(f"Content-Length: {len(body)}".encode())
        elif rewrite:
            out += [l.encode("latin-1") for l in header_lines if l.lower().startswith("content-length:")]
        out.append(b"Connection: close")
        writer.write(b"\r\n".join(out) + b"\r\n\r\n" + body)
        await writer.drain()

    def as_kms(self, head, body):
        """An answer's ETags (header and XML) replaced by SSE-KMS-like ones (`kms_etag`)."""
        def fake(real):
            given = kms_etag(real)
            self.real_etags[given] = real
            return given

        head = re.sub(rb'(?im)^(etag:\s*"?)([0-9a-f]{32}(?:-\d+)?)',
                      lambda m: m.group(1) + fake(m.group(2).decode()).encode(), head)
        body = re.sub(rb'(<ETag>(?:&quot;|")?)([0-9a-f]{32}(?:-\d+)?)',
                      lambda m: m.group(1) + fake(m.group(2).decode()).encode(), body)
        return head, body

    def with_full_checksum(self, body, sent):
        """A Complete answer with the whole object's CRC32C (`sent`, or it with a bit flipped)."""
        value = sent or "AAAAAA=="
        if self.args.complete_checksum == "wrong":
            raw = bytearray(base64.b64decode(value))
            raw[0] ^= 0x01
            value = base64.b64encode(bytes(raw)).decode()
        elif not sent:
            return body
        added = f"<ChecksumCRC32C>{value}</ChecksumCRC32C><ChecksumType>FULL_OBJECT</ChecksumType>"
        return body.replace(b"</CompleteMultipartUploadResult>", added.encode() + b"</CompleteMultipartUploadResult>", 1)

    async def answer_xml(self, writer, status, message):
        """An injected S3 error: `<Error>` with the code InvalidRequest and `message`, escaped as XML."""
        text = message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")
        body = (f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>InvalidRequest</Code><Message>{text}</Message>"
                "<RequestId>1</RequestId></Error>").encode()
        return await self.answer(writer, status, None, body=body, content_type="application/xml")

    async def answer(self, writer, status, payload, extra=(), body=None, content_type="application/json"):
        """Writes an injected answer; True when the connection stays open (--keep-alive)."""
        body = body if body is not None else json.dumps(payload).encode()
        keep = bool(self.args.keep_alive)
        lines = [f"HTTP/1.1 {status} Injected", f"Content-Type: {content_type}", f"Content-Length: {len(body)}",
                 "Connection: " + ("keep-alive" if keep else "close")] + [f"{k}: {v}" for k, v in extra]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        await writer.drain()
        return keep


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True, help="HOST:PORT of the real server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--fail", action="append", default=[])
    parser.add_argument("--retry-after", default=None)
    parser.add_argument("--fail-message", default="injected")
    parser.add_argument("--fail-xml", action="store_true")
    parser.add_argument("--cut-after", action="append", default=[])
    parser.add_argument("--corrupt-at", action="append", default=[])
    parser.add_argument("--stall", action="append", default=[])
    parser.add_argument("--require-bearer", default=None)
    parser.add_argument("--reset", action="append", default=[])
    parser.add_argument("--keep-alive", action="store_true")
    parser.add_argument("--listing", choices=["repeat", "endless"], default=None)
    parser.add_argument("--sse-kms", action="store_true")
    parser.add_argument("--complete-checksum", choices=["right", "wrong"], default=None)
    parser.add_argument("--preflight", choices=["all-buckets"], default=None)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()
    proxy = Proxy(args)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", args.port)
    proxy.port = server.sockets[0].getsockname()[1]
    print(f"ready {proxy.port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
