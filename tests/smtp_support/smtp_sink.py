#!/usr/bin/env python3
"""A real SMTP server for the e-mail tests: aiosmtpd on 127.0.0.1, printing JSON lines.

Usage: smtp_sink.py [--port N] [--auth USER:PASSWORD]

Prints one line {"ready": true, "port": N} once it accepts connections (port 0 picks a
free port), then one line per message accepted:

  {"mail_from": ..., "rcpt_tos": [...], "from": ..., "to": ..., "subject": ...,
   "content_type": ..., "text": <text/plain part or null>, "html": <text/html part or null>,
   "login": <the authenticated user or null>}

A recipient whose local part starts with "rejected" is refused as real servers refuse an
unknown mailbox, echoing the address: "550 5.1.1 <address>: Recipient address rejected";
one starting with "relaydenied" as a relay refuses a sender it does not know:
"550 5.7.1 Relaying denied".

With --auth, AUTH PLAIN/LOGIN is offered (also without TLS: this is a test sink) and only
that user and password are accepted. It runs until its stdin is closed, or it is killed.
"""

import argparse
import asyncio
import email
import email.policy
import json
import logging
import socket
import sys
import threading
import warnings

from aiosmtpd.smtp import SMTP, AuthResult


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Sink:
    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.startswith("rejected"):
            return f"550 5.1.1 <{address}>: Recipient address rejected"
        if address.startswith("relaydenied"):
            return "550 5.7.1 Relaying denied"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        text = message.get_body(preferencelist=("plain",))
        html = message.get_body(preferencelist=("html",))
        login = session.auth_data if session.authenticated else None
        if isinstance(login, bytes):
            login = login.decode("utf-8", "replace")
        emit(
            {
                "mail_from": envelope.mail_from,
                "rcpt_tos": list(envelope.rcpt_tos),
                "from": str(message.get("From", "")),
                "to": str(message.get("To", "")),
                "subject": str(message.get("Subject", "")),
                "content_type": message.get_content_type(),
                "text": text.get_content() if text is not None else None,
                "html": html.get_content() if html is not None else None,
                "login": login,
            }
        )
        return "250 Message accepted for delivery"


def authenticator_for(user, password):
    def authenticate(server, session, envelope, mechanism, auth_data):
        ok = (
            auth_data is not None
            and auth_data.login.decode("utf-8", "replace") == user
            and auth_data.password.decode("utf-8", "replace") == password
        )
        return AuthResult(success=ok, handled=False, auth_data=user if ok else None)

    return authenticate


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--auth", default=None, help="USER:PASSWORD to require")
    args = parser.parse_args()
    # AUTH without TLS is what this sink is for; keep stderr for real problems.
    warnings.filterwarnings("ignore")
    logging.getLogger("mail.log").setLevel(logging.ERROR)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(64)
    port = sock.getsockname()[1]

    handler = Sink()
    options = {}
    if args.auth is not None:
        user, _, password = args.auth.partition(":")
        options = {
            "authenticator": authenticator_for(user, password),
            "auth_require_tls": False,
            "auth_required": True,
        }

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    server = loop.run_until_complete(
        loop.create_server(lambda: SMTP(handler, hostname="sink.test", **options), sock=sock)
    )

    def wait_for_stdin_close():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        finally:
            loop.call_soon_threadsafe(loop.stop)

    threading.Thread(target=wait_for_stdin_close, daemon=True).start()
    emit({"ready": True, "port": port})
    try:
        loop.run_forever()
    finally:
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()


if __name__ == "__main__":
    main()
