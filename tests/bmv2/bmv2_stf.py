"""A small STF driver for real BMv2: the project's STF files (p4c's test format) run on
``simple_switch_grpc`` programmed over P4Runtime, with packets on veths.

What p4c's BMv2 runner does with simple_switch_CLI, this does over P4Runtime with the
P4Info p4c wrote: ``add`` and ``setdefault`` become table writes (STF names are the
P4Info names; a priority given in the file is BMv2's, where lower wins, and is turned
around for P4Runtime, where higher wins; entries without one rank in file order),
``mirroring_add`` a clone session, ``mc_*`` multicast groups.  ``packet`` sends the
frame into the port's veth from a tester namespace; at the end the frames every
watched port sent are compared with the ``expect`` lines as p4c's runner compares
them (per port, in order; ``*`` nibbles match anything; ``$`` ends the frame).
Files with commands outside that set, or with frames shorter than an Ethernet header
(which a veth cannot carry), are reported unsupported, not failed.
"""
from __future__ import annotations

import re
import socket
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from p4.v1 import p4runtime_pb2 as P

from softswitch.stf import (
    StfCommand,
    _hex_clean,
    _parse_action,
    match_expected,
    parse_number,
    parse_stf,
)

SUPPORTED = {"add", "setdefault", "packet", "expect", "mirroring_add", "mc_mgrp_create",
             "mc_node_create", "mc_node_associate", "wait", "no_packet"}
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def unsupported(commands: list[StfCommand]) -> list[str]:
    """The commands of a file this driver does not run."""
    return sorted({c.verb for c in commands} - SUPPORTED)


def short_frames(commands: list[StfCommand]) -> list[int]:
    """Lines sending frames shorter than an Ethernet header, which no veth carries
    (p4c's runner hands BMv2 its packets in pcap files, where they fit)."""
    return [c.line for c in commands if c.verb == "packet" and len(_hex_clean(c.args[1:])[0]) < 28]


def ports_of(commands: list[StfCommand]) -> list[int]:
    return sorted({int(c.args[0], 0) for c in commands if c.verb in ("packet", "expect") and c.args}
                  | {int(x, 0) for c in commands if c.verb == "mirroring_add" for x in c.args[1:2]}
                  | {int(x, 0) for c in commands if c.verb == "mc_node_create" for x in c.args[1:]})


def _bytes(value: int, width: int) -> bytes:
    return value.to_bytes((width + 7) // 8, "big")


class Bmv2Stf:
    """Runs one STF file's commands against a programmed BMv2 (see module docstring).

    ``write(update_list)`` sends P4Runtime updates; ``tx``/``rx`` are raw sockets of
    the tester's end of each port's veth."""

    def __init__(self, p4info: Any, write: Any, tx: dict[int, socket.socket]) -> None:
        self.info = p4info
        self.write = write
        self.tx = tx
        self._auto = 1 << 20
        self._mc_nodes: list[tuple[int, list[int]]] = []
        self._groups: dict[int, list[int]] = {}

    # -- P4Info look-ups ----------------------------------------------------------------
    def _table(self, name: str, where: str) -> Any:
        for t in self.info.tables:
            if name in (t.preamble.name, t.preamble.alias):
                return t
        raise ValueError(f"{where}: no table {name!r}")

    def _action(self, name: str, where: str) -> Any:
        cands = [a for a in self.info.actions if name in (a.preamble.name, a.preamble.alias)
                 or a.preamble.name.endswith("." + name)]
        if len(cands) != 1:
            raise ValueError(f"{where}: action {name!r} matches {len(cands)} actions")
        return cands[0]

    def _action_proto(self, text: str, where: str) -> P.Action:
        name, args = _parse_action(text, where)
        a = self._action(name, where)
        given = dict(args)
        out = P.Action(action_id=a.preamble.id)
        for p in a.params:
            out.params.add(param_id=p.id, value=_bytes(parse_number(given.pop(p.name), where)[0], p.bitwidth))
        if given:
            raise ValueError(f"{where}: action {name} has no parameters {sorted(given)}")
        return out

    @staticmethod
    def _field(t: Any, name: str, where: str) -> Any:
        cand = name.replace("$valid$", "$valid").replace(".$valid", ".isValid()").replace("$valid", "isValid()")
        cand = re.sub(r"\$(\d+)", r"[\1]", cand)
        for m in t.match_fields:
            if m.name in (name, cand):
                return m
        ends = [m for m in t.match_fields if m.name.endswith("." + cand) or cand.endswith("." + m.name)]
        if len(ends) == 1:
            return ends[0]
        raise ValueError(f"{where}: table {t.preamble.name} has no key {name!r}")

    # -- commands ------------------------------------------------------------------------
    def add(self, c: StfCommand, where: str) -> None:
        rest = c.text.split(None, 1)[1]
        tname, body = rest.split(None, 1)
        t = self._table(tname, where)
        body = re.sub(r"\s*=\s*\w+\s*$", "", body)
        paren = re.search(r"[\w.$\[\]]+\s*\(.*\)\s*$", body)
        if paren is None:
            raise ValueError(f"{where}: add without an action call")
        toks = body[:paren.start()].split()
        e = P.TableEntry(table_id=t.preamble.id)
        given_priority = int(toks.pop(0)) if toks and re.fullmatch(r"\d+", toks[0]) else None
        ranked = False
        for tok in toks:
            kname, val = tok.rsplit(":", 1)
            m = self._field(t, kname, where)
            fm = e.match.add(field_id=m.id)
            w = m.bitwidth
            full = (1 << w) - 1
            kind = _kind(m.match_type)
            if "/" in val:
                v, plen = val.split("/", 1)
                fm.lpm.value, fm.lpm.prefix_len = _bytes(parse_number(v, where)[0], w), int(plen, 0)
                if int(plen, 0) == 0:
                    e.match.pop()
                continue
            value, mask = parse_number(val, where)
            if kind == "lpm":
                plen = w if mask is None else (mask & full).bit_count()
                if plen == 0:
                    e.match.pop()
                    continue
                fm.lpm.value, fm.lpm.prefix_len = _bytes(value & ((full >> (w - plen)) << (w - plen)), w), plen
            elif kind == "ternary":
                mask = full if mask is None else mask
                ranked = True
                if mask == 0:
                    e.match.pop()
                    continue
                fm.ternary.value, fm.ternary.mask = _bytes(value & mask, w), _bytes(mask, w)
            elif kind == "optional":
                ranked = True
                if mask == 0:
                    e.match.pop()
                    continue
                fm.optional.value = _bytes(value, w)
            elif kind == "range":
                ranked = True
                fm.range.low = fm.range.high = _bytes(value, w)
            else:
                fm.exact.value = _bytes(value, w)
        ranked = ranked or any(_kind(m.match_type) in ("ternary", "range", "optional") for m in t.match_fields)
        if ranked:
            if given_priority is None:
                e.priority = self._auto
                self._auto -= 1
            else:
                e.priority = (1 << 24) - given_priority   # BMv2: lower wins; P4Runtime: higher
        e.action.action.CopyFrom(self._action_proto(paren.group(0), where))
        self.write([P.Update(type=P.Update.INSERT, entity=P.Entity(table_entry=e))])

    def setdefault(self, c: StfCommand, where: str) -> None:
        t = self._table(c.args[0], where)
        e = P.TableEntry(table_id=t.preamble.id, is_default_action=True)
        e.action.action.CopyFrom(self._action_proto(c.text.split(None, 2)[2], where))
        self.write([P.Update(type=P.Update.MODIFY, entity=P.Entity(table_entry=e))])

    def mirroring_add(self, c: StfCommand) -> None:
        e = P.Entity()
        cs = e.packet_replication_engine_entry.clone_session_entry
        cs.session_id = int(c.args[0], 0)
        cs.replicas.add(egress_port=int(c.args[1], 0), instance=0)
        self.write([P.Update(type=P.Update.INSERT, entity=e)])

    def multicast(self, c: StfCommand) -> None:
        a = [int(x, 0) for x in c.args]
        if c.verb == "mc_mgrp_create":
            self._groups[a[0]] = []
        elif c.verb == "mc_node_create":
            self._mc_nodes.append((a[0], a[1:]))       # its handle is its index, as in BMv2
            return
        else:   # mc_node_associate GROUP NODE
            self._groups[a[0]].append(a[1])
        group = a[0]
        e = P.Entity()
        mg = e.packet_replication_engine_entry.multicast_group_entry
        mg.multicast_group_id = group
        for node in self._groups[group]:
            rid, ports = self._mc_nodes[node]
            for port in ports:
                mg.replicas.add(egress_port=port, instance=rid)
        kind = P.Update.INSERT if c.verb == "mc_mgrp_create" else P.Update.MODIFY
        self.write([P.Update(type=kind, entity=e)])

    def run(self, commands: list[StfCommand], rx: dict[int, socket.socket], filename: str) -> list[str]:
        """Run the commands, then compare every watched port's output; the failures."""
        expects: list[tuple[int, int, str | None, bool]] = []
        for c in commands:
            where = f"{filename}:{c.line}"
            if c.verb == "add":
                self.add(c, where)
            elif c.verb == "setdefault":
                self.setdefault(c, where)
            elif c.verb == "mirroring_add":
                self.mirroring_add(c)
            elif c.verb.startswith("mc_"):
                self.multicast(c)
            elif c.verb == "packet":
                data, _ = _hex_clean(c.args[1:])
                self.tx[int(c.args[0], 0)].send(bytes.fromhex(data))
                time.sleep(0.02)     # outputs of one port stay in sending order
            elif c.verb == "expect":
                port = int(c.args[0], 0)
                if len(c.args) == 1:
                    expects.append((c.line, port, None, False))
                else:
                    data, exact = _hex_clean(c.args[1:], nibbles=True)
                    expects.append((c.line, port, data, exact))
        got = _drain(rx)
        failures = []
        by_port: dict[int, list[tuple[int, str, bool]]] = defaultdict(list)
        anything = {port for _, port, want, _ in expects if want is None}
        for line, port, want, exact in expects:
            if want is not None:
                by_port[port].append((line, want, exact))
        for port in sorted(rx):
            if port in anything:
                continue
            exp, out = by_port.get(port, []), got.get(port, [])
            for i, (line, data, exact) in enumerate(exp):
                if i >= len(out):
                    failures.append(f"{filename}:{line}: expected a packet on port {port}, none came")
                elif not match_expected(data, exact, out[i]):
                    failures.append(f"{filename}:{line}: packet {i + 1} on port {port} differs:\n"
                                    f"  expected {data}\n  got      {out[i].hex()}")
            failures += [f"{filename}: unexpected packet on port {port}: {f.hex()}" for f in out[len(exp):]]
        return failures


def _kind(match_type: int) -> str:
    from p4.config.v1 import p4info_pb2 as P4I
    return P4I.MatchField.MatchType.Name(match_type).lower()


def _drain(rx: dict[int, socket.socket], quiet_s: float = 1.0) -> dict[int, list[bytes]]:
    """Frames the switch sent on each port until none came for ``quiet_s``."""
    out: dict[int, list[bytes]] = defaultdict(list)
    last = time.monotonic()
    for s in rx.values():
        s.setblocking(False)
    while time.monotonic() - last < quiet_s:
        any_ = False
        for port, s in rx.items():
            while True:
                try:
                    data, addr = s.recvfrom(65536)
                except BlockingIOError:
                    break
                if addr[2] == PACKET_OUTGOING:
                    continue
                out[port].append(data)
                any_ = True
        if any_:
            last = time.monotonic()
        time.sleep(0.02)
    return out


def load(stf: Path) -> list[StfCommand]:
    return parse_stf(stf.read_text(), str(stf))
