#!/usr/bin/python3
"""smtp_sink.py: a real SMTP server (aiosmtpd, from Debian's python3-aiosmtpd)
for tests, on loopback only.

Each message received is written whole, as the server got it (after the
dot-unstuffing of SMTP's DATA), to OUTDIR/<n>.eml, next to OUTDIR/<n>.env
holding the envelope: "from <addr>" and one "to <addr>" line per recipient.
A file appears complete: it is written under a temp name and renamed.

  --port-file F        write the chosen port to F once listening
  --cert C --key K     the server's certificate and key (PEM)
  --require-starttls   offer STARTTLS and refuse everything but EHLO/HELO/
                       NOOP/QUIT/RSET/STARTTLS before it (the default mode)
  --no-starttls        plain SMTP, STARTTLS never offered
  --implicit-tls       SMTPS: TLS from the first byte
  --auth USER:PASSFILE require AUTH (only over TLS) with that user and the
                       password in PASSFILE; failed logins are refused
  --reject-rcpt ADDR   answer 550 to RCPT TO:<ADDR>
  --transcript F       append the verb of every command a client sends to F,
                       one a line ("EHLO", "STARTTLS", "AUTH", "MAIL", ...),
                       so a test can tell what a client sent in clear

Run with /usr/bin/python3: the pyenv interpreter on PATH does not see
Debian's packages.
"""
import argparse
import asyncio
import functools
import os
import signal
import socket
import ssl
import sys
import warnings

try:
    from aiosmtpd.smtp import SMTP, AuthResult
except ImportError:
    sys.stderr.write("smtp_sink: python3-aiosmtpd is missing: run make deps "
                     "(apt-get install python3-aiosmtpd)\n")
    sys.exit(3)


# aiosmtpd 1.4 warns about its own use of a deprecated field on each AUTH
warnings.filterwarnings("ignore", message="Session.login_data")


def over_tls(server):
    """Whether this connection runs over TLS (STARTTLS or implicit)."""
    t = server.transport
    return bool(server.session and server.session.ssl) or \
        (t is not None and t.get_extra_info("ssl_object") is not None)


class Sink:
    def __init__(self, outdir, reject):
        self.outdir = outdir
        self.reject = reject
        self.n = 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address == self.reject:
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.n += 1
        base = os.path.join(self.outdir, "%d" % self.n)
        env = "from %s\n" % envelope.mail_from
        env += "".join("to %s\n" % r for r in envelope.rcpt_tos)
        env += "tls %d\n" % (1 if over_tls(server) else 0)
        env += "auth %s\n" % getattr(session, "sd_user", "")
        for suffix, data in ((".env", env.encode()), (".eml", envelope.original_content)):
            tmp = base + suffix + ".tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.rename(tmp, base + suffix)
        return "250 Message accepted for delivery"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--require-starttls", action="store_true")
    mode.add_argument("--no-starttls", action="store_true")
    mode.add_argument("--implicit-tls", action="store_true")
    ap.add_argument("--auth")
    ap.add_argument("--reject-rcpt")
    ap.add_argument("--transcript")
    a = ap.parse_args()

    ctx = None
    if not a.no_starttls:
        if not a.cert or not a.key:
            ap.error("--cert and --key are needed unless --no-starttls")
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(a.cert, a.key)

    auth_kw = {}
    if a.auth:
        user, passfile = a.auth.split(":", 1)
        with open(passfile) as f:
            password = f.read().rstrip("\r\n")

        def authenticator(server, session, envelope, mechanism, auth_data):
            ok = (auth_data.login.decode() == user and auth_data.password.decode() == password)
            if ok:
                session.sd_user = user
            return AuthResult(success=ok)
        auth_kw = dict(authenticator=authenticator, auth_required=True, auth_require_tls=True)

    handler = Sink(a.outdir, a.reject_rcpt)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)

    class Recording(SMTP):
        """SMTP that notes each command's verb (never its argument)."""
        def _note(self, verb):
            if a.transcript:
                with open(a.transcript, "a") as f:
                    f.write(verb + ("+tls" if over_tls(self) else "") + "\n")

    for verb in ("EHLO", "HELO", "STARTTLS", "AUTH", "MAIL", "RCPT", "DATA", "QUIT", "RSET", "NOOP"):
        orig = getattr(SMTP, "smtp_" + verb)

        def make(orig=orig, verb=verb):
            @functools.wraps(orig)
            async def wrapped(self, arg):
                self._note(verb)
                return await orig(self, arg)
            return wrapped
        setattr(Recording, "smtp_" + verb, make())

    def factory():
        if a.implicit_tls:
            return Recording(handler, hostname="localhost", **auth_kw)
        return Recording(handler, hostname="localhost", tls_context=ctx,
                         require_starttls=ctx is not None, **auth_kw)

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    server = loop.run_until_complete(loop.create_server(
        factory, sock=sock, ssl=ctx if a.implicit_tls else None))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, loop.stop)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % sock.getsockname()[1])
    os.rename(tmp, a.port_file)
    try:
        loop.run_forever()
    finally:
        server.close()
        loop.close()


if __name__ == "__main__":
    main()
