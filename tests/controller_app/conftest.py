"""Fixtures of the controller CLI/runner tests (defined in ctl_app_helpers)."""
from ctl_app_helpers import cli, testbed  # noqa: F401
