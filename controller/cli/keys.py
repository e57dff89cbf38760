"""``python -m controller keys``: a new key file for ``formats.auth`` frames (mode 0600).

examples:
  python -m controller keys --out keys.yaml
  python -m controller keys --out keys.yaml --sender 10.0.1.1 --sender 10.0.2.1 --controller
  python -m controller keys --out keys.yaml --rotate      # add a key, keep signing with the old

Give the same file to the controller and every agent (``--key-file``).  ``--sender``
limits who may send (agents by IPv4 address; ``--controller`` adds the controller).
``--rotate`` on an existing file adds a fresh key id and leaves ``sign:`` alone;
``--sign ID`` then switches signing to it (README: Security).
"""
from __future__ import annotations

import argparse
import ipaddress
import secrets
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("keys", help="make or rotate a key file for agent/controller messages",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, metavar="FILE", help="the key file")
    p.add_argument("--sender", action="append", default=[], metavar="IPV4|ID",
                   help="a sender allowed to send (repeatable; default: any key holder)")
    p.add_argument("--controller", action="store_true", help="allow the controller as sender")
    p.add_argument("--rotate", action="store_true", help="add a key to an existing file")
    p.add_argument("--sign", type=int, metavar="ID", help="sign with this key id from now on")
    p.set_defaults(func=run)


def _sender(text: str) -> int:
    try:
        return int(ipaddress.IPv4Address(text))
    except ValueError:
        return int(text, 0)


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from common.auth.keys import KeyFileError, KeyRing, load_key_ring, write_key_file
    from formats.auth import CONTROLLER_SENDER_ID
    try:
        senders = {_sender(s) for s in args.sender}
    except ValueError as exc:
        print(f"controller keys: --sender: {exc}", file=sys.stderr)
        return 2
    if args.controller:
        senders.add(CONTROLLER_SENDER_ID)
    path = Path(args.out)
    try:
        if args.rotate or args.sign is not None:
            ring = load_key_ring(path)
            keys = dict(ring.keys)
            if args.rotate:
                keys[max(keys) + 1] = secrets.token_bytes(32)
            ring = dataclasses.replace(ring, keys=keys, sign_key_id=(
                ring.sign_key_id if args.sign is None else args.sign),
                senders=ring.senders if not senders else frozenset(senders))
        else:
            if path.exists():
                print(f"controller keys: {path} exists (use --rotate / --sign)", file=sys.stderr)
                return 2
            ring = KeyRing(keys={1: secrets.token_bytes(32)}, sign_key_id=1,
                           senders=frozenset(senders) if senders else None)
        write_key_file(path, ring)
    except KeyFileError as exc:
        print(f"controller keys: {exc}", file=sys.stderr)
        return 2
    print(f"{path}: keys {sorted(ring.keys)}, signing with {ring.sign_key_id}, senders "
          f"{'any key holder' if ring.senders is None else len(ring.senders)}")
    return 0
