#!/usr/bin/env python3
"""Verifies one received webhook with the public `standardwebhooks` package (PyPI).

Reads JSON {"secret": "whsec_...", "headers": {name: value}, "body_b64": "..."} on stdin.
Exits 0 when `Webhook(secret).verify(body, headers)` accepts it; otherwise prints the
reason on stderr and exits 1 (2 when the input or the package is unusable).
"""

import base64
import json
import sys


def main() -> int:
    try:
        from standardwebhooks.webhooks import Webhook
    except ImportError as e:  # pragma: no cover - environment problem
        print(f"standardwebhooks is not installed: {e}", file=sys.stderr)
        return 2
    try:
        message = json.load(sys.stdin)
        secret = message["secret"]
        headers = dict(message["headers"])
        body = base64.b64decode(message["body_b64"])
    except Exception as e:  # noqa: BLE001 - any bad input is a usage error
        print(f"bad input: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    try:
        Webhook(secret).verify(body, headers)
    except Exception as e:  # noqa: BLE001 - report every verification failure
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
