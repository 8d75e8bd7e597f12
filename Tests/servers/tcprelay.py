#!/usr/bin/env python3
"""A TCP relay for Hoist's tests that counts the connections its clients open.

  tcprelay.py --upstream HOST:PORT --log FILE                 relay bytes as they are (TLS passes through)
  tcprelay.py --upstream HOST:PORT --log FILE --tls-cert C --tls-key K
                                                              end TLS here (ALPN offers http/1.1 only) and
                                                              relay the plain bytes: a TLS server without HTTP/2
  tcprelay.py --upstream HOST:PORT --log FILE --rate BYTES    each connection carries at most BYTES a second
                                                              each way: one TCP stream across a WAN, whose
                                                              round-trip time and window cap it far below the card

It prints "ready PORT" once listening, and appends "connection N" to --log as each client
connection is accepted (so the count is the log's line count).
"""
import argparse
import asyncio
import ssl
import sys


async def pipe(reader, writer, rate=None):
    loop = asyncio.get_running_loop()
    start = loop.time()
    moved = 0
    try:
        while True:
            data = await reader.read(1 << 16)
            if not data:
                break
            writer.write(data)
            await writer.drain()
            if rate:
                # No faster than `rate` since the connection opened: sleep off any lead.
                moved += len(data)
                lead = start + moved / rate - loop.time()
                if lead > 0:
                    await asyncio.sleep(lead)
    except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--rate", type=float, help="bytes a second, per connection and direction")
    args = parser.parse_args()
    host, port = args.upstream.rsplit(":", 1)
    context = None
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        context.set_alpn_protocols(["http/1.1"])
    count = 0

    async def handle(client_reader, client_writer):
        nonlocal count
        count += 1
        with open(args.log, "a") as log:
            log.write(f"connection {count}\n")
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, upstream_writer, args.rate), pipe(upstream_reader, client_writer, args.rate))

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    print(f"ready {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
