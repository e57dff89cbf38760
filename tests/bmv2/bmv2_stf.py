"""A small STF driver for real BMv2: the project's STF files (p4c's test format) run on
``simple_switch_grpc`` programmed over P4Runtime with the P4Info p4c wrote.

What p4c's BMv2 runner does with simple_switch_CLI, this does over P4Runtime: ``add``
and ``setdefault`` become table writes (STF names are the P4Info names; a priority given
in the file is BMv2's, where lower wins, and is turned around for P4Runtime, where
higher wins; entries without one rank in file order), ``mirroring_add`` a clone session,
``mc_*`` multicast groups, ``meter_set_rates`` / ``meter_array_set_rates`` MeterEntry
writes (rates per µs in the file, per second on the wire), ``check_counter`` a counter read (after the switch has taken
every packet sent so far and gone quiet).  At the end the frames every watched port
sent are compared with the ``expect`` lines as p4c's runner compares them (per port,
in order; ``*`` nibbles match anything; ``$`` ends the frame).

Packets travel one of two ways (one driver; the port transport is the switch):
* ``PcapFilePorts``: p4c's runner's way, ``--use-files``: port N reads frames from the
  FIFO ``pN_in.pcap`` and writes ``pN_out.pcap``; any frame size fits, no root needed;
* ``VethPorts``: real interfaces, a raw socket on the tester's end of each port's veth
  (frames shorter than an Ethernet header cannot travel this way).
Commands outside the set above are reported unsupported, not failed.
"""
from __future__ import annotations

import fcntl
import os
import re
import socket
import struct
import termios
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from p4.v1 import p4runtime_pb2 as P
from scapy.utils import RawPcapReader

from softswitch.stf import (
    StfCommand,
    match_expected,
    parse_action_call,
    parse_check_counter,
    parse_number,
    parse_packet_hex,
    parse_stf,
)

SUPPORTED = {"add", "setdefault", "packet", "expect", "mirroring_add", "mc_mgrp_create",
             "mc_node_create", "mc_node_associate", "wait", "no_packet", "check_counter",
             "meter_set_rates", "meter_array_set_rates", "meter_get_rates"}
ETH_P_ALL = 0x0003
# how long the driver waits, before sending the next packet, for the frames the file
# expects of the packets before it: an E2E clone still in BMv2's pipeline when the
# next packet's I2E clone reached the same port left after it (a loaded CI run, the
# packets 20 ms apart)
OUTPUT_WAIT_S = 5.0
PACKET_OUTGOING = 4
PCAP_LINKTYPE_ETHERNET = 1


def unsupported(commands: list[StfCommand]) -> list[str]:
    """The commands of a file this driver does not run."""
    return sorted({c.verb for c in commands} - SUPPORTED)


def short_frames(commands: list[StfCommand]) -> list[int]:
    """Lines sending frames shorter than an Ethernet header, which no veth carries
    (``PcapFilePorts`` carries them, as p4c's runner does)."""
    return [c.line for c in commands if c.verb == "packet" and len(parse_packet_hex(c.args[1:])[0]) < 28]


def frames_per_port(commands: list[StfCommand]) -> dict[int, int]:
    """How many frames the file sends into each port."""
    out: dict[int, int] = defaultdict(int)
    for c in commands:
        if c.verb == "packet":
            out[int(c.args[0], 0)] += 1
    return dict(out)


def ports_of(commands: list[StfCommand]) -> list[int]:
    return sorted({int(c.args[0], 0) for c in commands if c.verb in ("packet", "expect") and c.args}
                  | {int(x, 0) for c in commands if c.verb == "mirroring_add" for x in c.args[1:2]}
                  | {int(x, 0) for c in commands if c.verb == "mc_node_create" for x in c.args[1:]})


class PacketPorts(Protocol):
    """How the driver's frames reach the switch's ports and come back."""

    def send(self, port: int, frame: bytes) -> None: ...

    def settle(self) -> None:
        """Return once the switch has taken every frame sent so far and gone quiet."""

    def wait_for(self, counts: dict[int, int], timeout_s: float = OUTPUT_WAIT_S) -> None:
        """Return once each port has sent at least ``counts[port]`` frames (or after
        ``timeout_s``: a frame that never comes is the comparison's to report)."""

    def received(self) -> dict[int, list[bytes]]:
        """Every frame each watched port sent (call once, at the end)."""


class VethPorts:
    """Raw sockets on the tester's ends of the switch's veths (port -> socket)."""

    def __init__(self, sockets: dict[int, socket.socket], quiet_s: float = 1.0) -> None:
        self.sockets = sockets
        self.quiet_s = quiet_s
        self._got: dict[int, list[bytes]] = defaultdict(list)

    def send(self, port: int, frame: bytes) -> None:
        self.sockets[port].send(frame)
        time.sleep(0.02)     # outputs of one port stay in sending order

    def settle(self) -> None:
        for port, frames in self._drain().items():
            self._got[port] += frames

    def wait_for(self, counts: dict[int, int], timeout_s: float = OUTPUT_WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while any(len(self._got[p]) < n for p, n in counts.items() if p in self.sockets):
            for port, frames in self._read_waiting().items():
                self._got[port] += frames
            if time.monotonic() > deadline:
                return
            time.sleep(0.002)

    def received(self) -> dict[int, list[bytes]]:
        self.settle()
        return {port: self._got.get(port, []) for port in self.sockets}

    def _drain(self) -> dict[int, list[bytes]]:
        """Frames the switch sent on each port until none came for ``quiet_s``."""
        out: dict[int, list[bytes]] = defaultdict(list)
        last = time.monotonic()
        while time.monotonic() - last < self.quiet_s:
            got = self._read_waiting()
            for port, frames in got.items():
                out[port] += frames
            if got:
                last = time.monotonic()
            time.sleep(0.02)
        return out

    def _read_waiting(self) -> dict[int, list[bytes]]:
        """The frames the switch sent that wait in the sockets now (none: empty)."""
        out: dict[int, list[bytes]] = defaultdict(list)
        for port, s in self.sockets.items():
            s.setblocking(False)
            while True:
                try:
                    data, addr = s.recvfrom(65536)
                except BlockingIOError:
                    break
                if addr[2] != PACKET_OUTGOING:
                    out[port].append(data)
        return dict(out)


class PcapFilePorts:
    """p4c's runner's way (``simple_switch --use-files``): port N reads the pcap file
    ``DIR/pN_in.pcap`` and writes ``DIR/pN_out.pcap``.

    ``inputs`` says how many frames each port will be sent.  BMv2 takes its next frame
    from the input whose head is earliest, so it waits until every input that has not
    ended holds a frame: a port sent nothing is a header-only file (ended at once), and
    each other port's input is a FIFO, opened read-write before the switch starts (so
    neither side waits for the other) and closed after its last frame.  With one input
    open, frames go one at a time (the switch has read the last one, and ``gap_s``
    passed), as over veths; with several, BMv2 holds each until the others have one,
    so they reach the queues in bursts (BMv2 does not replay the timestamps).  The
    output files are complete once every input has ended and ``quiet_s`` passed."""

    def __init__(self, workdir: Path, ports: list[int], inputs: dict[int, int],
                 quiet_s: float = 0.3, gap_s: float = 0.02) -> None:
        self.workdir = workdir
        self.ports = sorted(set(ports) | set(inputs))
        self.quiet_s = quiet_s
        self.gap_s = gap_s
        self._left = {port: n for port, n in inputs.items() if n > 0}
        self._clock_us = time.time_ns() // 1000
        self._fds: dict[int, int] = {}
        # pcap file header: magic, version 2.4, zone, sigfigs, snaplen, link type
        header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, PCAP_LINKTYPE_ETHERNET)
        for port in self.ports:
            path = workdir / f"p{port}_in.pcap"
            if port in self._left:
                os.mkfifo(path)
                self._fds[port] = os.open(path, os.O_RDWR)
                os.write(self._fds[port], header)
            else:
                path.write_bytes(header)

    def interfaces(self) -> dict[int, str]:
        """What BMv2 is given for each port (``-i N@PREFIX``, with ``--use-files``)."""
        return {port: str(self.workdir / f"p{port}") for port in self.ports}

    def send(self, port: int, frame: bytes) -> None:
        self._clock_us += round(self.gap_s * 1e6)
        sec, usec = divmod(self._clock_us, 1_000_000)
        fd = self._fds[port]
        os.write(fd, struct.pack("<IIII", sec, usec, len(frame), len(frame)) + frame)
        # one frame at a time, as the STF means it: the next finds the queues empty
        if len(self._fds) == 1:
            self._drained()
        self._left[port] -= 1
        if self._left[port] == 0:
            del self._fds[port]
            os.close(fd)
        time.sleep(self.gap_s)

    def settle(self) -> None:
        if len(self._fds) <= 1:
            self._drained()
        time.sleep(self.quiet_s)

    def wait_for(self, counts: dict[int, int], timeout_s: float = OUTPUT_WAIT_S) -> None:
        """BMv2 writes each output frame to its file as it leaves (measured: the files
        grow frame by frame), so the frames sent so far can be counted there."""
        deadline = time.monotonic() + timeout_s
        while any(_frames_in(self.workdir / f"p{p}_out.pcap") < n for p, n in counts.items()
                  if p in self.ports) and time.monotonic() < deadline:
            time.sleep(0.002)

    def _drained(self) -> None:
        deadline = time.monotonic() + 10
        while any(_pending(fd) for fd in self._fds.values()) and time.monotonic() < deadline:
            time.sleep(0.002)

    def received(self) -> dict[int, list[bytes]]:
        self.settle()
        self.close()
        time.sleep(self.quiet_s)
        out: dict[int, list[bytes]] = {}
        for port in self.ports:
            path = self.workdir / f"p{port}_out.pcap"
            out[port] = ([bytes(frame) for frame, _ in RawPcapReader(str(path))]
                         if path.is_file() and path.stat().st_size > 24 else [])
        return out

    def close(self) -> None:
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)


def _frames_in(path: Path) -> int:
    """Complete frames in a pcap file being written (0 while it does not exist)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    order = ">" if data[:4] == b"\xa1\xb2\xc3\xd4" else "<"   # the writer's byte order
    n, at = 0, 24
    while at + 16 <= len(data):
        at += 16 + struct.unpack_from(order + "I", data, at + 8)[0]
        if at > len(data):
            break
        n += 1
    return n


def _pending(fd: int) -> int:
    """Bytes written to a FIFO and not yet read by the switch."""
    return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0])


def _bytes(value: int, width: int) -> bytes:
    return value.to_bytes((width + 7) // 8, "big")


class Bmv2Stf:
    """Runs one STF file's commands against a programmed BMv2 (see module docstring).

    ``write(update_list)`` sends P4Runtime updates, ``read(entities)`` reads them."""

    def __init__(self, p4info: Any, write: Callable[[list[P.Update]], Any],
                 read: Callable[[list[P.Entity]], list[P.Entity]], ports: PacketPorts) -> None:
        self.info = p4info
        self.write = write
        self.read = read
        self.ports = ports
        self._named: dict[str, P.TableEntry] = {}
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
        name, args = parse_action_call(text, where)
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
        named = re.search(r"\s*=\s*(\w+)\s*$", body)
        if named:
            body = body[:named.start()]
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
        if named:
            self._named[named.group(1)] = e

    def check_counter(self, c: StfCommand, where: str) -> str | None:
        """Read the counter once the switch is quiet; why it breaks the check, if it does."""
        check = parse_check_counter(c.text, where)
        self.ports.settle()
        ent = P.Entity()
        if check.index in self._named:      # the direct counter of a named entry
            ent.direct_counter_entry.table_entry.CopyFrom(self._named[check.index])
        else:
            cands = [x for x in self.info.counters if check.name in (x.preamble.name, x.preamble.alias)
                     or x.preamble.name.endswith("." + check.name)]
            if len(cands) != 1:
                raise ValueError(f"{where}: counter {check.name!r} matches {len(cands)} counters")
            ent.counter_entry.counter_id = cands[0].preamble.id
            ent.counter_entry.index.index = parse_number(check.index, where)[0]
        got = self.read([ent])
        if len(got) != 1:
            raise ValueError(f"{where}: reading {check.name}({check.index}) gave {len(got)} entries")
        which = "direct_counter_entry" if check.index in self._named else "counter_entry"
        data = getattr(got[0], which).data
        return check.failure(data.packet_count, data.byte_count, where)

    def meter_rates(self, c: StfCommand, where: str) -> None:
        """``meter_set_rates NAME I CIR:CBURST PIR:PBURST`` (rates per µs, as BMv2's CLI)
        or ``meter_array_set_rates NAME ...`` (every cell): MeterEntry writes."""
        from softswitch.stf import meter_config
        name = c.args[0]
        info = next((m for m in self.info.meters if name in (m.preamble.name, m.preamble.alias)), None)
        if info is None:
            raise ValueError(f"{where}: no meter {name!r}")
        one = c.verb == "meter_set_rates"
        cfg = meter_config(c.args[2:] if one else c.args[1:], where)
        ups = []
        for i in [parse_number(c.args[1], where)[0]] if one else range(info.size):
            up = P.Update(type=P.Update.MODIFY)
            me = up.entity.meter_entry
            me.meter_id, me.index.index = info.preamble.id, i
            me.config.cir, me.config.cburst = cfg.cir, cfg.cburst
            me.config.pir, me.config.pburst = cfg.pir, cfg.pburst
            ups.append(up)
        self.write(ups)

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

    def run(self, commands: list[StfCommand], filename: str) -> list[str]:
        """Run the commands, then compare every watched port's output; the failures."""
        expects: list[tuple[int, int, str | None, bool]] = []
        expected_so_far: dict[int, int] = defaultdict(int)   # frames per port, so far
        failures: list[str] = []
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
            elif c.verb in ("meter_set_rates", "meter_array_set_rates"):
                self.meter_rates(c, where)
            elif c.verb == "packet":
                data, _ = parse_packet_hex(c.args[1:])
                # the frames expected of the packets before leave before this one enters
                self.ports.wait_for(dict(expected_so_far))
                self.ports.send(int(c.args[0], 0), bytes.fromhex(data))
            elif c.verb == "wait":
                self.ports.settle()
            elif c.verb == "check_counter":
                failure = self.check_counter(c, where)
                if failure:
                    failures.append(failure)
            elif c.verb == "expect":
                port = int(c.args[0], 0)
                if len(c.args) == 1:
                    expects.append((c.line, port, None, False))
                else:
                    data, exact = parse_packet_hex(c.args[1:], nibbles=True)
                    expects.append((c.line, port, data, exact))
                    expected_so_far[port] += 1
        got = self.ports.received()
        by_port: dict[int, list[tuple[int, str, bool]]] = defaultdict(list)
        anything = {port for _, port, want, _ in expects if want is None}
        for line, port, want, exact in expects:
            if want is not None:
                by_port[port].append((line, want, exact))
        for port in sorted(got):
            if port in anything:
                continue
            exp, out = by_port.get(port, []), got[port]
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


def load(stf: Path) -> list[StfCommand]:
    return parse_stf(stf.read_text(), str(stf))
