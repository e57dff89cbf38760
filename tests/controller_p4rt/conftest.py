"""Fixtures of the controller P4Runtime tests (defined in ctl_p4rt_helpers)."""
from ctl_p4rt_helpers import pipeline, schema, servers  # noqa: F401
