"""Schemathesis hooks for .ci/schemathesis (loaded through SCHEMATHESIS_HOOKS).

POST /v1/webhooks/prometheus takes a snappy-compressed protobuf, which schemathesis cannot
generate from a schema. This registers bodies for it: the real remote-write fixture, the
fixture truncated or with bytes appended, and arbitrary bytes, so the route is exercised both
past the decoders and at their error paths.
"""

from pathlib import Path

import schemathesis
from hypothesis import strategies as st

FIXTURE = (
    Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "remote_write" / "dcgm.snappy"
).read_bytes()

remote_write_bodies = st.one_of(
    st.just(FIXTURE),
    st.integers(min_value=0, max_value=len(FIXTURE)).map(lambda n: FIXTURE[:n]),
    st.binary(max_size=64).map(lambda extra: FIXTURE + extra),
    st.binary(max_size=512),
)

schemathesis.openapi.media_type("application/x-protobuf", remote_write_bodies)
