#!/usr/bin/env python3
"""A hostile HTTP server for Hoist's HTTP tests: it answers each request with an answer a real
server never gives (bad status lines, header floods, Location headers to other schemes and
hosts, endless or dripping bodies, resets, wrong lengths, chunked garbage, lying JSON).

Answers are lines of a corpus file (Tests/fuzz/corpus/http-answers.txt), `NAME ARGS...`, with
{port} (this server's port), {trap} and {localtrap} (the traps below) and {dir} (--trap-dir) filled in.
Request N gets:
  --script LINE ...  the Nth line given (the last one again after that), else
  --cycle            the corpus's lines in order, round and round, else
  --seed S           a line picked by a random generator seeded with S.

Two more listeners, the traps, on 127.0.0.2 ({trap}: another host as far as a client can tell)
and on another port of 127.0.0.1 ({localtrap}), log every connection they get and answer
nothing: a client that follows a hostile Location reaches one.
--trap-dir names the folder file:// Locations point into: nothing may ever appear there.

Prints "ready PORT"; logs one JSON line per request (and per trap connection) to --log.
"""
import argparse
import json
import random
import socket
import threading
import time
import zlib

ARGS = None
LOCK = threading.Lock()
COUNTER = [0]
PORTS = {}


def log(**fields):
    fields["time"] = time.monotonic()
    with LOCK, open(ARGS.log, "a") as out:
        out.write(json.dumps(fields) + "\n")


def fill(text):
    return (text.replace("{port}", str(PORTS["main"])).replace("{trap}", f"127.0.0.2:{PORTS['trap']}")
            .replace("{localtrap}", f"127.0.0.1:{PORTS['localtrap']}").replace("{dir}", ARGS.trap_dir or "/nonexistent"))


def escaped(text):
    """`\\r`, `\\n`, `\\x00` and `\\\\` in a corpus line become those bytes."""
    return fill(text).encode("latin-1").decode("unicode_escape").encode("latin-1")


def load_corpus():
    lines = []
    for line in open(ARGS.answers, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.strip() and not line.lstrip().startswith("#"):
            lines.append(line)
    return lines


def pick(corpus, rng):
    with LOCK:
        n = COUNTER[0]
        COUNTER[0] += 1
    if ARGS.script:
        return n, ARGS.script[min(n, len(ARGS.script) - 1)]
    if ARGS.cycle:
        return n, corpus[n % len(corpus)]
    with LOCK:
        return n, rng.choice(corpus)


def read_head(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            return None, b""
        data += piece
        if len(data) > 1 << 20:
            return None, b""
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


def header(lines, name):
    for line in lines[1:]:
        key, _, value = line.partition(":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def read_body(conn, length, rest):
    got = len(rest)
    while got < length:
        piece = conn.recv(min(1 << 16, length - got))
        if not piece:
            return False
        got += len(piece)
    return True


def send_head(conn, status, headers, reason="X"):
    lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers] + ["Connection: close"]
    conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))


def json_answer(conn, status, body, extra=()):
    data = body.encode("utf-8") if isinstance(body, str) else body
    send_head(conn, status, [("Content-Type", "application/json"), ("Content-Length", len(data))] + list(extra))
    conn.sendall(data)


BOMBS = {}


def gzip_bomb(megabytes):
    """MEGABYTES of zeros, gzipped (about a thousandth of that), made once."""
    with LOCK:
        if megabytes not in BOMBS:
            compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
            zeros = b"\0" * (1 << 20)
            out = [compressor.compress(zeros) for _ in range(megabytes)]
            out.append(compressor.flush())
            BOMBS[megabytes] = b"".join(out)
        return BOMBS[megabytes]


def answer(conn, line, method):
    name, _, rest = line.partition(" ")
    args = rest.split(" ") if rest else []
    if name == "status":   # status CODE [Name:value ...]: a JSON error body
        extra = [tuple(fill(a).split(":", 1)) for a in args[1:]]
        json_answer(conn, int(args[0]), '{"error":{"code":%s,"message":"hostile"}}' % args[0], extra)
    elif name == "json":   # json CODE TEXT: TEXT as the body
        json_answer(conn, int(args[0]), fill(" ".join(args[1:])))
    elif name == "location":   # location CODE URL: a session (or redirect) to URL
        send_head(conn, int(args[0]), [("Location", fill(" ".join(args[1:]))), ("Content-Length", 0)])
    elif name == "rawlocation":   # rawlocation CODE ESCAPED: Location bytes as given (CR, LF, NUL)
        conn.sendall(b"HTTP/1.1 " + args[0].encode() + b" X\r\nLocation: " + escaped(" ".join(args[1:]))
                     + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    elif name == "raw":   # raw ESCAPED: these bytes, then close
        conn.sendall(escaped(" ".join(args)))
    elif name == "huge-header":   # huge-header BYTES: one header that long
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Huge: " + b"h" * int(args[0]) + b"\r\nContent-Length: 2\r\n\r\n{}")
    elif name == "header-flood":   # headers, forever
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        n = 0
        while True:
            conn.sendall(b"X-Flood-%d: %s\r\n" % (n, b"y" * 1000))
            n += 1
    elif name == "interim-flood":   # 100 Continue answers, forever
        while True:
            conn.sendall(b"HTTP/1.1 100 Continue\r\nX-Pad: " + b"p" * 500 + b"\r\n\r\n")
    elif name == "endless-body":   # a body with no end (no length: until the connection closes)
        send_head(conn, int(args[0]) if args else 200, [("Content-Type", "application/json")])
        piece = b"[" * (1 << 16)
        while True:
            conn.sendall(piece)
    elif name == "endless-chunked":
        send_head(conn, 200, [("Transfer-Encoding", "chunked"), ("Content-Type", "application/json")])
        piece = b"10000\r\n" + b" " * 0x10000 + b"\r\n"
        while True:
            conn.sendall(piece)
    elif name == "big-length":   # big-length BYTES: a body that long, sent at full speed
        total = int(args[0])
        send_head(conn, 200, [("Content-Length", total), ("Content-Type", "application/json")])
        piece = b" " * (1 << 20)
        while total > 0:
            conn.sendall(piece[: min(total, len(piece))])
            total -= len(piece)
    elif name == "gzip-bomb":   # gzip-bomb MEGABYTES of zeros, gzipped, as the body
        bomb = gzip_bomb(int(args[0]))
        send_head(conn, 200, [("Content-Encoding", "gzip"), ("Content-Type", "application/json"),
                              ("Content-Length", len(bomb))])
        conn.sendall(bomb)
    elif name == "drip-body":   # drip-body SECONDS: a byte of the body every SECONDS, forever
        send_head(conn, 200, [("Content-Length", 1 << 30), ("Content-Type", "application/json")])
        while True:
            conn.sendall(b" ")
            time.sleep(float(args[0]))
    elif name == "drip-headers":   # drip-headers SECONDS: a byte of the head every SECONDS
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"s" * 100000:
            conn.sendall(bytes([byte]))
            time.sleep(float(args[0]))
    elif name == "silent":   # never answer
        time.sleep(600)
    elif name == "reset":   # reset BYTES: that much of a body, then a TCP reset
        send_head(conn, 200, [("Content-Length", 100000), ("Content-Type", "application/json")])
        conn.sendall(b"{" * int(args[0]))
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    elif name == "short-body":   # Content-Length says more than comes
        send_head(conn, 200, [("Content-Length", 1000), ("Content-Type", "application/json")])
        conn.sendall(b'{"name": "x"')
    elif name == "long-body":   # more than Content-Length says
        send_head(conn, 200, [("Content-Length", 2), ("Content-Type", "application/json")])
        conn.sendall(b"{}" + b"HTTP/1.1 200 OK\r\nLocation: file:///etc/passwd\r\n\r\n" * 100)
    elif name == "chunked-garbage":
        send_head(conn, 200, [("Transfer-Encoding", "chunked")])
        conn.sendall(b"zz\r\nhello\r\n-5\r\nx\r\nffffffffffffffffff\r\n")
    elif name == "close":   # close without a word
        pass
    else:
        raise ValueError("unknown answer " + name)


def serve(conn, corpus, rng):
    try:
        conn.settimeout(ARGS.read_timeout)
        head, rest = read_head(conn)
        if head is None:
            return
        lines = head.split("\r\n")
        method, target = (lines[0].split(" ") + ["", ""])[:2]
        n, line = pick(corpus, rng)
        log(n=n, method=method, target=target, host=header(lines, "host"),
            bearer=(header(lines, "authorization") or "").startswith("Bearer "), answer=line)
        name = line.split(" ", 1)[0]
        length = int(header(lines, "content-length") or 0)
        if name == "slow-read":   # slow-read SECONDS: read the body a byte every SECONDS, answer nothing
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            while conn.recv(1):
                time.sleep(float(line.split(" ")[1]))
            return
        if name != "close" and not read_body(conn, length, rest):
            return
        conn.settimeout(None)
        answer(conn, line, method)
    except (BrokenPipeError, ConnectionResetError, socket.timeout, OSError):
        pass
    finally:
        try:
            conn.close()
        except OSError:
            pass


def trap(listener, name):
    while True:
        conn, peer = listener.accept()
        conn.settimeout(2)
        try:
            first = conn.recv(4096)
        except OSError:
            first = b""
        log(trap=name, first=first.decode("latin-1"))
        conn.close()


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--answers", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--trap-dir", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cycle", action="store_true")
    parser.add_argument("--script", nargs="*", default=[])
    parser.add_argument("--read-timeout", type=float, default=30)
    ARGS = parser.parse_args()
    corpus = load_corpus()
    rng = random.Random(ARGS.seed)
    main_socket = socket.socket()
    main_socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    main_socket.bind(("127.0.0.1", 0))
    main_socket.listen(64)
    PORTS["main"] = main_socket.getsockname()[1]
    for name, host in (("trap", "127.0.0.2"), ("localtrap", "127.0.0.1")):
        trap_socket = socket.socket()
        trap_socket.bind((host, 0))
        trap_socket.listen(64)
        PORTS[name] = trap_socket.getsockname()[1]
        threading.Thread(target=trap, args=(trap_socket, name), daemon=True).start()
    log(traps={"trap": f"127.0.0.2:{PORTS['trap']}", "localtrap": f"127.0.0.1:{PORTS['localtrap']}"})
    print(f"ready {PORTS['main']}", flush=True)
    while True:
        conn, _ = main_socket.accept()
        threading.Thread(target=serve, args=(conn, corpus, rng), daemon=True).start()


if __name__ == "__main__":
    main()
