"""Schemathesis hooks for `npm run fuzz:api` (scripts/api-fuzz.ts).

An Idempotency-Key names one request (API.md §5): a client makes a fresh one per request it means,
and the same key with another request is a 422. Hypothesis draws keys from a small alphabet and
draws the same ones again for different requests, which the API rightly refuses; so a valid key
(what the document allows) gets a suffix that makes it unique in the run, within the 255 characters.
An invalid one is sent as drawn, so the 400 for it is still exercised.
"""

import itertools
import re

import schemathesis

VALID_KEY = re.compile(r"^[\x21-\x7e]([\x20-\x7e]{0,253}[\x21-\x7e])?$")
COUNTER = itertools.count(1)


@schemathesis.hook
def before_call(context, case, kwargs):
    headers = case.headers or {}
    for name, value in headers.items():
        if name.lower() == "idempotency-key" and isinstance(value, str) and VALID_KEY.match(value):
            suffix = f"~{next(COUNTER)}"
            headers[name] = value[: 255 - len(suffix)] + suffix
