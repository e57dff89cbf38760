"""The test bed secured: a per-run key file (mode 0600) for the controller and every
agent, and P4Runtime over mutual TLS with certificates made for the run; everything
works as without, a client without a certificate is refused, nothing is left behind."""
from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import pytest
from tmx_helpers import leftovers

from controller.p4rt import ConnectError, SwitchClient, TlsOptions
from mininet_topos import experiment
from mininet_topos.topologies import resolve_topology

pytestmark = [pytest.mark.root, pytest.mark.mininet, pytest.mark.bpf]


def test_testbed_keys_and_mutual_tls(tmp_path):
    topo = resolve_topology("dumbbell")
    with experiment.Testbed(topo=topo, switch="softswitch", logs=tmp_path / "logs",
                            sample_interval_s=0, agent_hosts=("h1", "h5"), mtls=True) as tb:
        res = tb.resources()
        assert tb.key_file is not None and tb.sock_dir is not None
        assert stat.S_IMODE(tb.key_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(tb.sock_dir.stat().st_mode) == 0o700
        assert all(sw.tls is not None for sw in tb.topo.switches)
        assert "3 received" in tb.net.get("h1").cmd("ping -c 3 -i 0.2 -W 1 10.0.2.1")
        state = json.loads((tb.logs / "controller" / "controller_state.json").read_text())
        assert all(s["state"] == "ready" and s["primary"] for s in state["switches"])
        sw = tb.topo.switches[0]
        assert sw.tls is not None
        bare = SwitchClient(name=sw.name, address=sw.grpc_addr, device_id=sw.device_id,
                            timeout_s=1, tls=TlsOptions(ca_pem=Path(sw.tls.ca).read_bytes(),
                                                        server_name=sw.name))
        with pytest.raises(ConnectError, match="TLS"):
            bare.connect()
        time.sleep(1.5)   # agents ship (empty or not) and the controller writes its state
        state = json.loads((tb.logs / "controller" / "controller_state.json").read_text())
        assert state["collector"].get("rejected", {}) == {}
        for log in (tb.logs).glob("*.log"):
            assert "without a key" not in log.read_text(errors="replace")
    assert leftovers(res, str(tmp_path / "logs")) == []
