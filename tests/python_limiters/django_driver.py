"""django-ratelimit's own get_usage (the version requirements.txt pins),
driven on the test's clock: tests/integration/python_limiters.rs passes the
rate as an argument, writes "KEY NANOSECONDS" lines on stdin and reads "A"
(not limited) or "R" (limited) for each request, as @ratelimit(key=…,
rate=…) counts it (increment=True). time.time() is the line's time; the
cache is Django's local-memory cache.

With three more arguments, FROM_NS TO_NS FAIL_OPEN, the cache fails while
the time is in [FROM_NS, TO_NS) — add stores nothing and incr raises
ValueError, as python-memcached does when its server is unavailable — and
RATELIMIT_FAIL_OPEN is FAIL_OPEN ("true" or "false")."""

import sys
import time

import django
from django.conf import settings
from django.core.cache.backends.locmem import LocMemCache

NOW_NS = [0]
DOWN = [int(sys.argv[2]), int(sys.argv[3])] if len(sys.argv) > 3 else [0, 0]


class Flaky(LocMemCache):
    """The local-memory cache, unreachable over DOWN."""

    def down(self):
        return DOWN[0] <= NOW_NS[0] < DOWN[1]

    def add(self, *args, **kwargs):
        return False if self.down() else super().add(*args, **kwargs)

    def incr(self, *args, **kwargs):
        if self.down():
            raise ValueError("cache unavailable")
        return super().incr(*args, **kwargs)


settings.configure(
    CACHES={"default": {"BACKEND": "__main__.Flaky"}},
    RATELIMIT_FAIL_OPEN=len(sys.argv) > 4 and sys.argv[4] == "true",
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
        NOW_NS[0] = nanos
        # Seconds as a float whose int() is the whole seconds exactly.
        NOW[0] = nanos // 1_000_000_000 + (nanos % 1_000_000_000) / 1e9
        assert int(NOW[0]) == nanos // 1_000_000_000
        usage = get_usage(None, group="g", key=lambda group, request: key, rate=rate, increment=True)
        # is_ratelimited: no usage (a cache that failed open) is not limited.
        out.append("R" if usage is not None and usage["should_limit"] else "A")
    sys.stdout.write("\n".join(out) + "\n")


main()
