"""The same sink checks with the XDP build (entry int_sink_xdp) instead of tc."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_ebpf_sink import (  # noqa: F401  (tests and fixtures run again here, with XDP)
    _clean,
    test_malformed_counted_and_passed_unmodified,
    test_non_int_traffic_untouched,
    test_psn_gaps_and_reordering_exact,
    test_psn_wraps_at_24_bits,
    test_random_header_damage_kernel_agrees_with_reference,
    test_records_and_restored_packets,
)

from ebpf.sink import IntSink, SinkConfig

pytestmark = [pytest.mark.root, pytest.mark.bpf]


@pytest.fixture(scope="module")
def sink(pair) -> Iterator[IntSink]:
    with IntSink(pair.h2.ifname, netns=pair.h2.name, config=SinkConfig(hook="xdp", run_packets=1)) as s:
        yield s


def test_xdp_detached_on_close(pair):
    cfg = SinkConfig(hook="xdp")
    with IntSink(pair.h1.ifname, netns=pair.h1.name, config=cfg):
        assert "prog/xdp" in pair.h1.run(["ip", "-d", "link", "show", pair.h1.ifname]).stdout
    assert "prog/xdp" not in pair.h1.run(["ip", "-d", "link", "show", pair.h1.ifname]).stdout
