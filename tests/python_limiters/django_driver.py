"""django-ratelimit's own get_usage (the version requirements.txt pins),
driven on the test's clock: tests/integration/python_limiters.rs passes the
rate as an argument, writes "KEY NANOSECONDS" lines on stdin and reads "A"
(not limited) or "R" (limited) for each request, as @ratelimit(key=…,
rate=…) counts it (increment=True). time.time() is the line's time; the
cache is Django's local-memory cache."""

import sys
import time

import django
from django.conf import settings

settings.configure(
    CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}},
    # The usage is counted in a cache the test owns: no checks of a shared one.
    SILENCED_SYSTEM_CHECKS=["django_ratelimit.E003", "django_ratelimit.W001"],
    INSTALLED_APPS=[],
)
django.setup()

from django_ratelimit.core import get_usage  # noqa: E402

NOW = [0.0]
time.time = lambda: NOW[0]


def main():
    rate = sys.argv[1]
    out = []
    for line in sys.stdin.read().split("\n"):
        if not line:
            continue
        key, nanos = line.split(" ")
        nanos = int(nanos)
        # Seconds as a float whose int() is the whole seconds exactly.
        NOW[0] = nanos // 1_000_000_000 + (nanos % 1_000_000_000) / 1e9
        assert int(NOW[0]) == nanos // 1_000_000_000
        usage = get_usage(None, group="g", key=lambda group, request: key, rate=rate, increment=True)
        out.append("R" if usage["should_limit"] else "A")
    sys.stdout.write("\n".join(out) + "\n")


main()
