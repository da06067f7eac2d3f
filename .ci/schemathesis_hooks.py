"""Schemathesis hooks for `cargo xtask fuzz-api` (loaded through SCHEMATHESIS_HOOKS).

`GET /api/v1/tenants?watch=true` answers a server-sent-event stream that stays
open until the client leaves, so a request that asks to watch would only ever
time out. Such requests are sent as plain lists instead; the watch stream has
its own end-to-end tests (tests/e2e/watch.rs). Values the server refuses
(anything but true, 1, false, 0 or empty) are left alone, so that invalid
`watch` values are still fuzzed.
"""

import schemathesis

WATCHING = {"true", "1", ""}


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    if case.method.upper() != "GET" or not case.path.rstrip("/").endswith("/tenants"):
        return
    query = case.query or {}
    value = query.get("watch")
    if value is True or (not isinstance(value, bool) and str(value) in WATCHING):
        query.pop("watch")
