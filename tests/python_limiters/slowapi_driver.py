"""slowapi itself (the versions requirements.txt pins) in a Starlette app,
driven on the test's clock: tests/integration/python_limiters.rs passes the
limit string and the strategy as arguments, writes "KEY NANOSECONDS" lines on
stdin and reads "A" (served) or "R SECONDS" (429 with its Retry-After) for
each request, sent through Starlette's TestClient to a route decorated with
@limiter.limit(LIMIT), the client keyed by a header. time.time() is the
line's time, ns / 10**9. The memory storage's cleanup thread runs on the
wall clock; it is turned off, and the check's own expiry decides."""

import sys
import time
import warnings

from limits.storage import MemoryStorage

# Starlette's TestClient warns that it will move to httpx2.
warnings.simplefilter("ignore")
NOW = [0.0]
time.time = lambda: NOW[0]
MemoryStorage._MemoryStorage__schedule_expiry = lambda self: None

from slowapi import Limiter, _rate_limit_exceeded_handler  # noqa: E402
from slowapi.errors import RateLimitExceeded  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import PlainTextResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402


def main():
    limit, strategy = sys.argv[1], sys.argv[2]
    limiter = Limiter(
        key_func=lambda request: request.headers["x-key"],
        strategy=strategy,
        headers_enabled=True,
    )

    @limiter.limit(limit)
    async def home(request: Request):
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/", home)])
    app.state.limiter = limiter
    app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)
    out = []
    with TestClient(app) as client:
        for line in sys.stdin.read().split("\n"):
            if not line:
                continue
            key, nanos = line.split(" ")
            NOW[0] = int(nanos) / 1_000_000_000
            response = client.get("/", headers={"x-key": key})
            if response.status_code == 200:
                out.append("A")
            else:
                assert response.status_code == 429, response.status_code
                out.append("R " + response.headers["Retry-After"])
    sys.stdout.write("\n".join(out) + "\n")


main()
