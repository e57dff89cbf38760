"""Other clients on the controller's switches: a second controller (higher election
id) and p4runtime-shell take over, write, leave; the running controller keeps going,
then takes the switch back and removes what they wrote."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ctl_app_helpers import ROOT, SwitchBed

from controller.p4rt import ArbitrationError, SwitchClient, TableEntry, WriteError, entry_to_proto
from controller.runner import Controller, RunConfig
from tests.helpers.waiting import wait_for

SHELL_SCRIPT = """
import sys
import p4runtime_sh.shell as sh
sh.setup(device_id=int(sys.argv[2]), grpc_addr=sys.argv[1], election_id=(0, 2))
before = sum(1 for _ in sh.TableEntry("SwitchIngress.ipv4_lpm").read())
te = sh.TableEntry("SwitchIngress.ipv4_lpm")(action="SwitchIngress.ipv4_forward")
te.match["dst_addr"] = "10.9.9.0/24"
te.action["port"] = "3"
te.action["src_mac"] = "02:00:00:00:00:01"
te.action["dst_mac"] = "02:00:00:00:00:09"
te.insert()
after = sum(1 for _ in sh.TableEntry("SwitchIngress.ipv4_lpm").read())
print("routes", before, after)
sh.teardown()
"""


def _controller(bed: SwitchBed, out: Path) -> Controller:
    return Controller(cfg=RunConfig(topology=str(bed.topology), out_dir=str(out), report_port=0,
                                    agent_port=0, status_interval_s=0.2)).start()


def _routes(ctl: Controller) -> int:
    sw = ctl.fleet.switches["s1"]
    return sum(1 for te in sw.client.read_table_entries()  # type: ignore[union-attr]
               if te.table_id == sw.schema.table("ipv4_lpm").id)


def test_second_controller_takes_over_and_leaves(testbed: SwitchBed, tmp_path: Path) -> None:
    ctl = _controller(testbed, tmp_path)
    other = SwitchClient(name="s1", address=testbed.addresses["s1"], device_id=1, election_id=7)
    try:
        s1 = ctl.fleet.switches["s1"]
        other.connect()
        assert wait_for(lambda: s1.client.role_state == "backup")  # type: ignore[union-attr]
        schema = s1.schema
        from p4.v1 import p4runtime_pb2 as P
        extra = entry_to_proto(schema, TableEntry.make(
            "ipv4_lpm", {"dst_addr": "10.9.9.0/24"}, "ipv4_forward", {"port": 3, "src_mac": 1, "dst_mac": 2}))
        other.write([P.Update(type=P.Update.INSERT, entity=P.Entity(table_entry=extra))])
        with pytest.raises((ArbitrationError, WriteError)):
            s1.sync()      # a backup does not write
        ctl.tick()         # ... and the controller does not take over from a live primary
        assert s1.client.role_state == "backup" and _routes(ctl) == 6  # type: ignore[union-attr]
        other.close()
        assert wait_for(lambda: s1.client.is_primary, timeout_s=10)  # type: ignore[union-attr]
        assert s1.client.election_id == 7  # type: ignore[union-attr]
        assert wait_for(lambda: _routes(ctl) == 5)
    finally:
        other.close()
        ctl.stop()


def test_p4runtime_shell_alongside(testbed: SwitchBed, tmp_path: Path) -> None:
    pytest.importorskip("p4runtime_sh", reason="p4runtime-shell is not installed")
    ctl = _controller(testbed, tmp_path)
    try:
        r = subprocess.run([sys.executable, "-c", SHELL_SCRIPT, testbed.addresses["s1"], "1"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120, check=False,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert r.returncode == 0, r.stderr[-3000:]
        assert "routes 5 6" in r.stdout
        s1 = ctl.fleet.switches["s1"]
        assert wait_for(lambda: s1.client.is_primary and _routes(ctl) == 5, timeout_s=10)  # type: ignore[union-attr]
    finally:
        ctl.stop()
