"""Password hashes: argon2id (argon2-cffi, its RFC 9106 low-memory profile) for every account.

The one other format read is the PBKDF2 hash of the shared UI password of LongDoc before
accounts ("pbkdf2_sha256$<iterations>$<salt>$<hash>", ui/auth.py): the first admin starts with
it (app/services/accounts.py) and is moved to argon2id at their first sign-in.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

LEGACY_PREFIX = "pbkdf2_sha256$"
# The smallest password LongDoc takes from a person (NIST SP 800-63B asks for 8).
MIN_PASSWORD_CHARS = 8
_hasher = PasswordHasher()


def hash_password(password: str) -> str:
    """An argon2id hash of `password`: salt and parameters inside, never the password."""
    if not password:
        raise ValueError("the password is empty")
    return _hasher.hash(password)


def verify_password(password: str, encoded: str) -> bool:
    """Whether `password` matches `encoded` (argon2 or the legacy PBKDF2); False for any
    malformed hash."""
    if encoded.startswith(LEGACY_PREFIX):
        return _verify_pbkdf2(password, encoded)
    try:
        return _hasher.verify(encoded, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(encoded: str) -> bool:
    """Whether a hash that just verified should be replaced by a fresh argon2id one."""
    if encoded.startswith(LEGACY_PREFIX):
        return True
    try:
        return _hasher.check_needs_rehash(encoded)
    except InvalidHashError:
        return True


def _verify_pbkdf2(password: str, encoded: str) -> bool:
    try:
        _, iterations, salt, expected = encoded.split("$")
        digest = hashlib.pbkdf2_hmac("sha256", password.encode(), _unb64(salt), int(iterations))
        return hmac.compare_digest(digest, _unb64(expected))
    except (ValueError, TypeError):
        return False


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
