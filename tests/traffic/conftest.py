"""Fixtures of the traffic tests: two hosts joined by a veth pair (prefix "ttr")."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from mininet_topos.netns import Namespace, two_hosts


@pytest.fixture
def pair() -> Iterator[tuple[Namespace, Namespace]]:
    with two_hosts("ttr") as hs:
        yield hs
