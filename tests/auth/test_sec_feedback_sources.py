"""Several controllers may send feedback to an agent (a primary and a standby): each
signs with its own sender id of ``CONTROLLER_SENDER_IDS`` and the agent admits their
addresses; feedback from an unlisted address or a non-controller sender is refused and
counted.  Here the agent's Python checks (no kernel filter attached); the kernel side is
``tests/ebpf/test_ebpf_agent_auth.py``."""
from __future__ import annotations

from pathlib import Path

import pytest

from common.auth import KeyFile, KeyRing, Signer
from controller.runner.config import RunConfig
from controller.runner.errors import RunError
from ebpf.agent import AgentConfig, build_parser
from ebpf.agent_auth import AgentAuth
from ebpf.errors import ConfigError
from formats.auth import CONTROLLER_SENDER_ID, CONTROLLER_SENDER_IDS, FrameKind

PRIMARY, STANDBY, AGENT = CONTROLLER_SENDER_ID, CONTROLLER_SENDER_ID - 1, 0x0A000101
KEYS = KeyFile.from_ring(KeyRing(keys={1: b"q" * 32}, sign_key_id=1,
                                 senders=frozenset({PRIMARY, STANDBY, AGENT})))


def _auth(hosts: tuple[str, ...]) -> AgentAuth:
    a = AgentAuth(KEYS, agent_id=AGENT)
    a.sources = frozenset(hosts)   # what filter_feedback sets where no kernel filter attaches
    return a


def test_primary_and_standby_both_applied_others_counted() -> None:
    a = _auth(("10.254.0.1", "10.254.0.5"))
    primary = Signer(KEYS, sender_id=PRIMARY, kind=FrameKind.FEEDBACK)
    standby = Signer(KEYS, sender_id=STANDBY, kind=FrameKind.FEEDBACK,
                     epoch_us=primary.epoch - 10_000_000)   # started earlier than the primary
    got = []
    for i in range(5):   # interleaved: neither is taken for a replay of the other
        got.append(a.open_feedback(primary.seal(b"p%d" % i), ("10.254.0.1", 5000)))
        got.append(a.open_feedback(standby.seal(b"s%d" % i), ("10.254.0.5", 5000)))
    assert got == [x for i in range(5) for x in (b"p%d" % i, b"s%d" % i)]
    # a sealed frame from an unlisted address, an agent's id as sender, a replay
    assert a.open_feedback(primary.seal(b"x"), ("10.254.0.9", 5000)) is None
    assert a.open_feedback(Signer(KEYS, sender_id=AGENT, kind=FrameKind.FEEDBACK).seal(b"y"),
                           ("10.254.0.5", 5000)) is None
    replay = standby.seal(b"z")
    assert a.open_feedback(replay, ("10.254.0.5", 5000)) == b"z"
    assert a.open_feedback(replay, ("10.254.0.5", 5000)) is None
    assert a.rejected() == {"unknown_source": 1, "unknown_sender": 1, "replay": 1}
    assert a.feedback.stats.accepted == 11


def test_agent_config_and_command_line() -> None:
    cfg = AgentConfig(iface="eth0", controller=("10.254.0.1", 32767),
                      feedback_from=("10.254.0.5", "10.254.0.1"))
    assert cfg.feedback_sources() == ("10.254.0.1", "10.254.0.5")
    assert AgentConfig(iface="eth0").feedback_sources() == ()
    with pytest.raises(ConfigError, match="feedback_from 'h2'"):
        AgentConfig(iface="eth0", feedback_from=("h2",))
    args = build_parser().parse_args(["--iface", "eth0", "--feedback-from", "10.254.0.5",
                                      "--feedback-from", "10.254.0.9"])
    assert args.feedback_from == ["10.254.0.5", "10.254.0.9"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--iface", "eth0", "--feedback-from", "nowhere"])


def test_controller_sender_id_is_a_controller_id() -> None:
    assert RunConfig(topology="t.yaml", sender_id=STANDBY).sender_id in CONTROLLER_SENDER_IDS
    with pytest.raises(RunError, match="255.255.255.0/24"):
        RunConfig(topology="t.yaml", sender_id=AGENT)


def test_standby_controller_seals_with_its_id_and_the_agent_takes_it(tmp_path) -> None:
    """The pieces as the command lines make them: one key file listing both controllers,
    the standby's ``--sender-id``, an agent admitting the standby's address."""
    from common.auth.keys import generate_key_file
    from controller.runner.auth import ControllerAuth
    from controller.topology import load_topology

    key_file = tmp_path / "keys.yaml"
    generate_key_file(key_file, senders=[PRIMARY, STANDBY, AGENT])
    topo = load_topology(Path(__file__).resolve().parents[2] / "mininet_topos" / "topofiles"
                         / "dumbbell.yaml")
    sides = {}
    for name, sid in (("primary", PRIMARY), ("standby", STANDBY)):
        ca = ControllerAuth.from_config(RunConfig(topology="x", key_file=str(key_file),
                                                  sender_id=sid), topo)
        assert ca.feedback_signer is not None and ca.feedback_signer.sender_id == sid
        sides[name] = ca.feedback_signer
    agent = AgentAuth(KeyFile(key_file), agent_id=AGENT)
    agent.sources = frozenset({"10.254.0.1", "10.254.0.5"})
    assert agent.open_feedback(sides["standby"].seal(b"s"), ("10.254.0.5", 1)) == b"s"
    assert agent.open_feedback(sides["primary"].seal(b"p"), ("10.254.0.1", 1)) == b"p"
    assert agent.rejected() == {}
