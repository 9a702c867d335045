"""A password hasher for the test processes: PBKDF2-SHA256 at 1,000 iterations instead of Django's
1,200,000 (a third of a second a hash here; a database part made about 58). Its hashes keep the
algorithm's name and carry their iteration count, so a live site a test starts, which keeps
Django's own hasher, checks them as it checks its own (and hashes a signed-in user's password again
at its full count, as it would after an upgrade of Django)."""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class FewIterationsPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1_000
