"""The mitigation moving a straggler rank, end to end on real namespaces: four ranks of a
ring all-reduce and a standby on one leaf's hosts (h1-h4, spare h5 of a leaf-spine
topology, their addresses on five namespaces), rank 2 straggling from its start
(``--fault-straggle``).  The straggler finding goes through the policy and the
mitigator (act) with the job file's sockets: the move is written, every rank's data
check passes (the spare's too), and the action keeps its reason and evidence."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from controller.intent import IntentOptions
from controller.mitigate import Finding, Guard, Job, MitigationMode, Mitigator
from controller.topology.generators import leaf_spine
from tests.traffic.netns_util import finish, ring_with_standby, star
from traffic.control import request
from traffic.errors import ControlError

TOPO = leaf_spine(2, n_spines=1, hosts_per_leaf=5)     # h1..h5: 10.0.1.1..5 on leaf s2
ITERS = 60
STRAGGLER = 2


def _iter_of(path: str) -> int:
    try:
        return int(request(path, {"cmd": "collective"}, 1.0)["collective"]["iter"])
    except (ControlError, KeyError, TypeError, ValueError):
        return -1


@pytest.mark.timeout(240)
def test_the_mitigator_moves_a_straggler_to_the_spare_and_the_job_completes(tmp_path: Path) -> None:
    with star(5, subnet_prefix="10.0.1") as hosts:
        ranks, spare = hosts[:4], hosts[4]
        args = ["-s", "256K", "-c", str(ITERS), "--rate", "50M", "--engine", "python", "--timeout", "150"]
        late = ["--fault-straggle", f"{time.time():.3f}:3600:0.03"]   # each step 30 ms late
        with ring_with_standby(ranks, spare, tmp_path, args, per_rank={STRAGGLER: late}) as (ctl, sctl, procs):
            # the job file names the sockets by links (as the test bed's does): the replies
            # come from the sockets' own paths
            (tmp_path / "ln").mkdir()
            links = {}
            for h, c in [*((f"h{r + 1}", c) for r, c in enumerate(ctl)), ("h5", sctl)]:
                links[h] = str(tmp_path / "ln" / f"{h}.sock")
                Path(links[h]).symlink_to(c)
            job = Job.from_dict({"ranks": ["h1", "h2", "h3", "h4"], "spares": ["h5"], "controls": links}, TOPO)
            m = Mitigator(topo=TOPO, options=IntentOptions(), switches={}, mode=MitigationMode.ACT,
                          guard=Guard(confirm_s=0.5), job=job)
            end = time.monotonic() + 60
            while _iter_of(ctl[STRAGGLER]) < 2:
                assert time.monotonic() < end, "the job did not reach iteration 2"
                time.sleep(0.05)
            # the straggler finding, as the diagnosis names it, twice (the confirmation)
            f = [Finding(kind="straggler", type="rank", component=str(STRAGGLER), confidence=0.9,
                         onset=time.time(), source="diagnosis", evidence={"late_steps": 12})]
            assert m.step(f, 100.0) == []
            [a] = m.step(f, 101.0)
            finish(procs, 200)
        assert (a.verb, a.target, a.outcome) == ("move_rank", "rank 2", "written"), a.as_dict()
        assert a.evidence["spare"] == "h5" and a.evidence["spare_ip"] == spare.ip
        assert a.evidence["move"]["ok"] and a.evidence["late_steps"] == 12
        assert "from h3 to spare h5" in a.reason and m.policy.placed == {STRAGGLER: "h5"}
        [row] = [x for x in m.take_unexported() if x["verb"] == "move_rank"]
        assert row["outcome"] == "written" and row["evidence"]["move"]["at_iter"] == a.evidence["move"]["at_iter"]
        at = int(a.evidence["move"]["at_iter"])
        outs = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)]
        sp = json.loads((tmp_path / "spare.json").read_text())
        for s in [*outs, sp]:
            assert s["finished"] and s["collective"]["result_ok"] is True, s["collective"]
        assert outs[STRAGGLER]["collective"]["iterations"] == at
        assert (sp["rank"], sp["collective"]["first_iteration"]) == (STRAGGLER, at)
        assert sp["collective"]["iterations"] == ITERS - at
