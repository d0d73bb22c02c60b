#!/usr/bin/env python3
"""Fetch an armored OpenPGP key and install it as a binary keyring (what
`curl URL | gpg --dearmor -o DEST` does in NVIDIA's install guides, without gpg).

    python3 fetch_key.py URL DEST
"""

import base64
import os
import sys
import urllib.request


def dearmor(text):
    """The binary packets of an ASCII-armored block (RFC 4880, 6.2)."""
    lines = text.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("-----BEGIN PGP"))
    body = lines[start + 1 :]
    body = body[body.index("") + 1 :] if "" in body else body  # skip the armor headers
    data = [line for line in body if not line.startswith(("=", "-----END"))]
    return base64.b64decode("".join(data))


def main():
    url, dest = sys.argv[1], sys.argv[2]
    with urllib.request.urlopen(url, timeout=60) as response:
        raw = response.read()
    key = dearmor(raw.decode("ascii")) if raw.lstrip().startswith(b"-----BEGIN") else raw
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = dest + ".tmp"
    with open(tmp, "wb") as f:
        f.write(key)
    os.chmod(tmp, 0o644)
    os.replace(tmp, dest)
    print(f"{dest}: {len(key)} bytes from {url}")


main()
