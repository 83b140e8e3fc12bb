"""Run the published A202 Python reference verifier over a party bundle.

Usage: A202_REFERENCE_DIR=/path/to/a202 python3 reference_verify.py BUNDLE

A202_REFERENCE_DIR is a checkout of the public repository
a202-protocol/a202 (its reference/ directory holds the packages
a202_reference and a202_mcp). Nothing of it is copied here: this script
imports it from there at run time.

What it runs is the reference's verify_evidence tool
(a202_mcp.tools.handle_verify_evidence), which is a202_reference's
verify_bundle with the rules resolver the tool builds for a stated rules
version, exactly as the reference answers an agent. This script only
converts a bundle directory into the tool's input: every file of objects/
and key_records/ as one object list, the JWKs of keys.json as the P-256
public keys the tool reads from its party state, and bundle.json's
rules_version. The reference takes no mandates, so mandates/ is not read.

It prints one line of JSON (the tool's result counts, the number of checks
and of signatures it was given) and exits 0 when no check failed, 1 when
one did, 2 when it cannot run.
"""

import base64
import json
import os
import sys
from pathlib import Path


def _b64(value):
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))


class _HeldKeys:
    """The part of the reference's party state verify_evidence reads."""

    def __init__(self, keys):
        self._keys = keys

    def public_keys(self):
        return dict(self._keys)


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = os.environ.get("A202_REFERENCE_DIR")
    if not root or not (Path(root) / "reference" / "a202_reference").is_dir():
        print("A202_REFERENCE_DIR does not name a checkout of a202-protocol/a202", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(root) / "reference"))
    from cryptography.hazmat.primitives.asymmetric import ec
    from a202_mcp.tools import handle_verify_evidence

    bundle = Path(argv[1])
    objects = []
    for sub in ("objects", "key_records"):
        d = bundle / sub
        if d.is_dir():
            for path in sorted(d.glob("*.json")):
                with path.open("rb") as f:
                    objects.append(json.load(f))
    keys = {}
    keys_file = bundle / "keys.json"
    if keys_file.exists():
        with keys_file.open("rb") as f:
            for key_id, jwk in json.load(f).items():
                if jwk.get("kty") != "EC" or jwk.get("crv") != "P-256":
                    continue
                x = int.from_bytes(_b64(jwk["x"]), "big")
                y = int.from_bytes(_b64(jwk["y"]), "big")
                keys[key_id] = ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
    rules_version = None
    manifest = bundle / "bundle.json"
    if manifest.exists():
        with manifest.open("rb") as f:
            rules_version = json.load(f).get("rules_version")

    result = handle_verify_evidence(_HeldKeys(keys), objects=objects, rules_version=rules_version)
    if result.get("outcome") == "refused":
        print(json.dumps(result), file=sys.stderr)
        return 2
    signatures = sum(len(o.get("signatures") or []) for o in objects)
    print(json.dumps({"results": result["results"], "checks": len(result["checks"]),
                      "objects": len(objects), "signatures": signatures}))
    return 1 if result["results"]["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
