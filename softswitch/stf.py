"""STF tests (p4c's Simple Test Framework format): read, run, report.

Read as p4c's BMv2 runner reads them:
* ``add TABLE [PRIORITY] KEY:VALUE ... ACTION(PARAM:VALUE, ...)``: values in
  decimal, ``0x`` hex or ``0b`` binary; ``*`` nibbles (bits for binary) make a
  ternary value/mask; ``VALUE/LEN`` is an LPM prefix; a higher priority number
  wins; without one, earlier ternary entries win;
* ``setdefault TABLE ACTION(...)``; ``packet PORT HEX``;
* ``expect PORT [HEX]``: ``*`` nibbles are wildcards, a trailing ``$`` makes the
  expectation exact (otherwise the packet may be longer); packets are expected
  per port in order; a port named in some ``packet``/``expect`` line must get
  exactly its expected packets, other ports are not watched (as with BMv2, which
  has no interface for them) unless the runner is strict; ``expect PORT`` with
  no data accepts any packets on that port;
* ``mirroring_add SESSION PORT``, ``mc_mgrp_create GROUP``,
  ``mc_node_create RID PORT...``, ``mc_node_associate GROUP NODE``, ``wait``,
  ``check_counter NAME(INDEX) [packets|bytes OP N]`` (or ``NAME(ENTRY)`` for the
  direct counter of an entry named by ``add ... = ENTRY``), ``remove all``; ``#`` comments;
* the simple_switch_CLI commands p4c's runner passes through: ``mirroring_add_mc
  SESSION GROUP`` (the group's replicas at that time), ``mirroring_delete``,
  ``mc_node_update NODE PORT...``, ``counter_write NAME I PACKETS BYTES``,
  ``register_write NAME I VALUE``, ``register_reset NAME``, ``meter_set_rates NAME I
  CIR:CBURST PIR:PBURST`` and ``meter_array_set_rates`` (rates per microsecond, as
  BMv2), and the reads ``counter_read``, ``register_read``, ``meter_get_rates``,
  ``mirroring_get`` (names checked, nothing compared).
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from softswitch.errors import RuntimeApiError, StfError
from softswitch.externs.stateful import MeterConfig
from softswitch.tables import Exact, Lpm, Optional, Range, Ternary

_NUM = re.compile(r"^(0x[0-9a-fA-F*_]+|0b[01*_]+|\d+)$")


@dataclass(slots=True, kw_only=True)
class StfCommand:
    line: int
    verb: str
    args: list[str]
    text: str


@dataclass(slots=True, kw_only=True)
class StfResult:
    """Outcome of a run: `failures` empty means every expectation held."""

    failures: list[str] = field(default_factory=list)
    packets_sent: int = 0
    packets_checked: int = 0
    log: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def parse_stf(text: str, filename: str = "<stf>") -> list[StfCommand]:
    """Split an STF file into commands (one per non-empty, non-comment line)."""
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        # keep "action(args)" together, split the rest on whitespace
        m = re.match(r"^(\S+)\s*(.*)$", line)
        assert m
        verb = m.group(1).lower()
        out.append(StfCommand(line=n, verb=verb, args=m.group(2).split(), text=line))
    known = {"add", "setdefault", "packet", "expect", "mirroring_add", "mc_mgrp_create",
             "mc_node_create", "mc_node_associate", "wait", "check_counter", "remove", "no_packet",
             # simple_switch_CLI commands p4c's BMv2 runner passes through
             "mirroring_add_mc", "mirroring_delete", "mirroring_get", "mc_node_update",
             "counter_read", "counter_write", "register_read", "register_write", "register_reset",
             "meter_get_rates", "meter_set_rates", "meter_array_set_rates"}
    for c in out:
        if c.verb not in known:
            raise StfError(f"{filename}:{c.line}: unknown STF command {c.verb!r}")
    return out


def parse_number(tok: str, where: str) -> tuple[int, int | None]:
    """(value, mask) of an STF number; mask is None unless it had '*' digits."""
    tok = tok.replace("_", "")
    if not _NUM.match(tok):
        raise StfError(f"{where}: bad number {tok!r}")
    if tok.startswith(("0x", "0X")):
        digits, base, bits = tok[2:], 16, 4
    elif tok.startswith(("0b", "0B")):
        digits, base, bits = tok[2:], 2, 1
    else:
        return int(tok), None
    if "*" not in digits:
        return int(digits, base), None
    value = int(digits.replace("*", "0"), base)
    full = (1 << bits) - 1
    mask = 0
    for d in digits:
        mask = (mask << bits) | (0 if d == "*" else full)
    return value, mask


def parse_action_call(text: str, where: str) -> tuple[str, list[tuple[str, str]]]:
    """``NAME(PARAM:VALUE, ...)`` of an ``add``/``setdefault`` line: the action's name and
    its arguments in the file's order (values still text: the runner knows their widths)."""
    m = re.match(r"^\s*([\w.$\[\]]+)\s*\((.*)\)\s*$", text)
    if not m:
        raise StfError(f"{where}: bad action call {text!r}")
    args = []
    body = m.group(2).strip()
    if body:
        for part in body.split(","):
            if ":" not in part:
                raise StfError(f"{where}: action argument {part.strip()!r} is not NAME:VALUE")
            k, v = part.split(":", 1)
            args.append((k.strip(), v.strip()))
    return m.group(1), args


# simple_switch_CLI commands the STF may carry, with their least argument count
_CLI_COMMANDS = {
    "mirroring_add_mc": 2, "mirroring_delete": 1, "mirroring_get": 1, "mc_node_update": 1,
    "counter_read": 2, "counter_write": 4, "register_read": 2, "register_write": 3,
    "register_reset": 1, "meter_get_rates": 2, "meter_set_rates": 3, "meter_array_set_rates": 2,
}


def meter_config(rates: list[str], where: str) -> MeterConfig:
    """BMv2's ``rate:burst`` pairs (committed, then peak; rates per microsecond)."""
    pairs = []
    for r in rates:
        rate, sep, burst = r.partition(":")
        try:
            pairs.append((float(rate), int(burst, 0)))
        except ValueError:
            raise StfError(f"{where}: bad meter rate {r!r}, expected RATE:BURST") from None
        if not sep:
            raise StfError(f"{where}: bad meter rate {r!r}, expected RATE:BURST")
    if len(pairs) != 2:
        raise StfError(f"{where}: a meter needs two RATE:BURST pairs (committed, peak), got {len(pairs)}")
    (cr, cb), (pr, pb) = pairs
    return MeterConfig(cir=round(cr * 1_000_000), cburst=cb, pir=round(pr * 1_000_000), pburst=pb)


def parse_packet_hex(parts: list[str], *, nibbles: bool = False) -> tuple[str, bool]:
    """Hex digits of a packet line and whether it ended in ``$``.  Expectations are
    compared nibble by nibble (``nibbles``), so they may have an odd digit count; in
    packet data a last lone digit is a byte of its own (``...20 5`` ends 0x20 0x05), as
    p4c's runner turns digit pairs into bytes."""
    s = "".join(parts)
    exact = s.endswith("$")
    s = s.rstrip("$").replace(" ", "")
    if s.lower().startswith("0x"):
        s = s[2:]
    if not re.fullmatch(r"[0-9a-fA-F*]*", s):
        raise StfError(f"bad packet data {''.join(parts)!r}")
    if len(s) % 2 and not nibbles:
        s = s[:-1] + "0" + s[-1]
    return s.lower(), exact


@dataclass(frozen=True, slots=True)
class CounterCheck:
    """``check_counter NAME(INDEX) [packets|bytes OP N]``: ``index`` is a number, or the
    name an ``add ... = NAME`` gave an entry (its direct counter); without a comparison
    the line only checks that the counter exists."""

    name: str
    index: str
    what: str | None = None
    op: str | None = None
    value: int = 0

    def failure(self, packets: int, nbytes: int, where: str) -> str | None:
        """Why the read counts break the check (None: they keep it)."""
        if self.what is None or self.op is None:
            return None
        got = packets if self.what == "packets" else nbytes
        ok = {"==": got == self.value, "!=": got != self.value, "<=": got <= self.value,
              "<": got < self.value, ">=": got >= self.value, ">": got > self.value}[self.op]
        return None if ok else (f"{where}: counter {self.name}[{self.index}] {self.what} is {got}, "
                                f"expected {self.op} {self.value}")


def parse_check_counter(text: str, where: str) -> CounterCheck:
    """The parts of a ``check_counter`` line."""
    m = re.match(r"check_counter\s+([\w.]+)\((\w+)\)(?:\s+(packets|bytes)\s*(==|!=|<=|<|>=|>)\s*(\d+))?",
                 text)
    if not m:
        raise StfError(f"{where}: bad check_counter {text!r}")
    name, idx, what, op, val = m.groups()
    return CounterCheck(name, idx, what, op, int(val) if val else 0)


def match_expected(expected: str, exact: bool, actual: bytes) -> bool:
    got = actual.hex()
    if exact and len(got) != len(expected):
        return False
    if len(got) < len(expected):
        return False
    return all(e == "*" or e == g for e, g in zip(expected, got))


class StfRunner:
    """Runs STF commands against a `Switch` (see softswitch.targets.python.switch)."""

    def __init__(self, switch: Any, *, trace: bool = False, strict: bool = False) -> None:
        self.switch = switch
        self.rt = switch.runtime
        self.trace = trace
        self.strict = strict
        # entries named by "add ... = ID": (table, key, priority), for check_counter
        self._named_entries: dict[str, tuple[str, list[Any], int]] = {}
        self._auto_priority = 1 << 20

    def _table_key(self, table: Any, name: str, where: str) -> int:
        names = [k.name for k in table.keys]
        cand = name.replace("$valid$", "$valid").replace(".$valid", ".isValid()").replace("$valid", "isValid()")
        cand = re.sub(r"\$(\d+)", r"[\1]", cand)  # p4c writes stack elements as extra$0.h
        for i, n in enumerate(names):
            if n == cand or n == name:
                return i
        ends = [i for i, n in enumerate(names) if n.endswith("." + cand) or cand.endswith("." + n)]
        if len(ends) == 1:
            return ends[0]
        raise StfError(f"{where}: table {table.name} has no key {name!r} (keys: {', '.join(names)})")

    def _match(self, kind: str, width: int, tok: str, where: str) -> Any:
        if "/" in tok:
            v, plen_text = tok.split("/", 1)
            value, _ = parse_number(v, where)
            return Lpm(value, int(plen_text, 0))
        value, mask = parse_number(tok, where)
        full = (1 << width) - 1
        if kind == "lpm":
            if mask is None:
                return Lpm(value, width)
            plen = (mask & full).bit_count()
            return Lpm(value & mask, plen)
        if kind == "ternary":
            return Ternary(value & (mask if mask is not None else full), mask if mask is not None else full)
        if kind == "range":
            return Range(value, value)
        if kind == "optional":
            return Optional(None) if mask == 0 else Optional(value)
        if mask is not None:
            raise StfError(f"{where}: wildcard value {tok} for an exact key")
        return Exact(value)

    def _action_args(self, table: Any, action: str, args: list[tuple[str, str]], where: str
                     ) -> tuple[str, list[int]]:
        try:
            full = self.rt._action(table, action)
        except RuntimeApiError as exc:
            raise StfError(f"{where}: {exc}") from exc
        params = table.actions[full].params
        given = dict(args)
        out = []
        for pname, _ in params:
            if pname not in given:
                raise StfError(f"{where}: action {full} parameter {pname} not given")
            out.append(parse_number(given.pop(pname), where)[0])
        if given:
            raise StfError(f"{where}: action {full} has no parameter(s) {sorted(given)}")
        return full, out

    def _add(self, c: StfCommand, where: str) -> None:
        rest = c.text.split(None, 1)[1]
        m = re.match(r"^(\S+)\s+(.*)$", rest)
        if not m:
            raise StfError(f"{where}: add needs a table")
        table = self.rt.table(m.group(1))
        named = re.search(r"\s*=\s*(\w+)\s*$", m.group(2))  # "= ID" names the entry
        body = m.group(2)[:named.start()] if named else m.group(2)
        paren = re.search(r"[\w.$\[\]]+\s*\(.*\)\s*$", body)
        if not paren:
            raise StfError(f"{where}: add without an action call")
        action_text = paren.group(0)
        toks = body[:paren.start()].split()
        priority = None
        if toks and re.fullmatch(r"\d+", toks[0]):
            priority = int(toks.pop(0))
        key: list[Any] = [None] * len(table.keys)
        for tok in toks:
            if ":" not in tok:
                raise StfError(f"{where}: key {tok!r} is not NAME:VALUE")
            kname, val = tok.rsplit(":", 1)
            i = self._table_key(table, kname, where)
            kf = table.keys[i]
            key[i] = self._match(kf.match_kind, kf.width, val, where)
        for i, kf in enumerate(table.keys):
            if key[i] is None:
                key[i] = {"ternary": Ternary(0, 0), "lpm": Lpm(0, 0), "optional": Optional(None),
                          "range": Range(0, (1 << kf.width) - 1)}.get(kf.match_kind)
                if key[i] is None:
                    raise StfError(f"{where}: exact key {kf.name} not given")
        aname, aargs = parse_action_call(action_text, where)
        full, args = self._action_args(table, aname, aargs, where)
        if table.needs_priority:
            if priority is None:
                priority = self._auto_priority
                self._auto_priority -= 1
            else:
                priority += 1  # STF allows priority 0; the table's priorities start at 1
        else:
            priority = 0
        table.insert(key, full, args, priority)
        if named:
            self._named_entries[named.group(1)] = (table.name, key, priority)

    def run(self, commands: list[StfCommand], filename: str = "<stf>") -> StfResult:
        """Run every command, then compare outputs as p4c's BMv2 runner does.

        Only ports named in a ``packet`` or ``expect`` line are watched (BMv2 has
        no interface for the others, so their packets vanish); on a watched port
        the packets must be exactly the expected ones, in order; ``expect PORT``
        without data accepts any packets on that port.  With ``strict`` set, a
        packet on a port nobody named is a failure too.
        """
        res = StfResult()
        outputs: dict[int, list[bytes]] = defaultdict(list)
        expects: list[tuple[int, int, str | None, bool]] = []
        watched: set[int] = set()
        for c in commands:
            where = f"{filename}:{c.line}"
            if c.verb in ("packet", "expect") and c.args:
                watched.add(self._port(c.args[0], where))
            try:
                self._run_one(c, where, res, outputs, expects)
            except RuntimeApiError as exc:
                raise StfError(f"{where}: {c.text}: {exc}") from exc
        by_port: dict[int, list[tuple[int, str, bool]]] = defaultdict(list)
        any_ports: dict[int, int] = {}
        for line, port, data, exact in expects:
            if data is None:
                any_ports.setdefault(port, line)
            else:
                by_port[port].append((line, data, exact))
        for port, line in any_ports.items():
            if port in by_port:
                raise StfError(f"{filename}:{line}: port {port} has expectations both with "
                               "and without packet data")
        for port in sorted(watched | (set(outputs) if self.strict else set())):
            if port in any_ports:
                res.packets_checked += len(outputs.get(port, []))
                continue
            exp = by_port.get(port, [])
            got = outputs.get(port, [])
            for i, (line, data, exact) in enumerate(exp):
                if i >= len(got):
                    res.failures.append(f"{filename}:{line}: expected a packet on port {port}, "
                                        f"none came (expected {data})")
                    continue
                res.packets_checked += 1
                if not match_expected(data, exact, got[i]):
                    res.failures.append(f"{filename}:{line}: packet {i + 1} on port {port} differs:\n"
                                        f"  expected {data}{'$' if exact else ''}\n"
                                        f"  got      {got[i].hex()}")
            for j in range(len(exp), len(got)):
                res.failures.append(f"{filename}: unexpected packet {j + 1} on port {port}: {got[j].hex()}")
        return res

    @staticmethod
    def _port(tok: str, where: str) -> int:
        try:
            return int(tok, 0)
        except ValueError:
            raise StfError(f"{where}: bad port {tok!r}") from None

    def _run_one(self, c: StfCommand, where: str, res: StfResult, outputs: dict[int, list[bytes]],
                 expects: list) -> None:
        v, a = c.verb, c.args
        if v == "add":
            self._add(c, where)
        elif v == "setdefault":
            if len(a) < 2:
                raise StfError(f"{where}: setdefault TABLE ACTION(...)")
            table = self.rt.table(a[0])
            aname, aargs = parse_action_call(c.text.split(None, 2)[2], where)
            full, args = self._action_args(table, aname, aargs, where)
            table.set_default(full, args)
        elif v == "packet":
            if not a:
                raise StfError(f"{where}: packet PORT [HEX]")
            data, _ = parse_packet_hex(a[1:])
            if "*" in data:
                raise StfError(f"{where}: '*' in packet data")
            outs, events = self.switch.process_packet(self._port(a[0], where), bytes.fromhex(data),
                                                      trace=self.trace)
            res.packets_sent += 1
            if self.trace:
                res.log.extend(e.format() for e in events)
            for o in outs:
                outputs[o.port].append(o.data)
        elif v == "expect":
            if not a:
                raise StfError(f"{where}: expect PORT [HEX]")
            if len(a) == 1:
                expects.append((c.line, self._port(a[0], where), None, False))
            else:
                data, exact = parse_packet_hex(a[1:], nibbles=True)
                expects.append((c.line, self._port(a[0], where), data, exact))
        elif v == "mirroring_add":
            self.rt.clone_session_set(int(a[0], 0), [int(a[1], 0)])
        elif v == "mc_mgrp_create":
            self.rt.pre.group_create(int(a[0], 0))
        elif v == "mc_node_create":
            self.rt.mc_node_create(int(a[0], 0), [int(x, 0) for x in a[1:]])
        elif v == "mc_node_associate":
            self.rt.mc_node_associate(int(a[0], 0), int(a[1], 0))
        elif v in _CLI_COMMANDS:
            self._cli_command(c, where)
        elif v == "remove":
            for t in self.switch.program.tables.values():
                t.clear()
        elif v == "check_counter":
            self._check_counter(c, where, res)
        # wait, no_packet: nothing to do for an in-process switch

    def _cli_command(self, c: StfCommand, where: str) -> None:
        """simple_switch_CLI commands with their CLI meaning; the reads only check names."""
        v, a = c.verb, c.args
        want = _CLI_COMMANDS[v]
        if len(a) < want:
            raise StfError(f"{where}: {v} needs {want} argument(s), got {len(a)}")
        numeric = {"counter_read": 1, "counter_write": 3, "register_read": 1, "register_write": 2,
                   "meter_get_rates": 1, "meter_set_rates": 1}.get(v, 0)
        num = [self._number(x, where) for x in a[1:1 + numeric]]
        if v == "mirroring_add_mc":
            session, group = self._number(a[0], where), self._number(a[1], where)
            self.rt.clone_session_set(session, list(self.rt.pre.groups.get(group, [])))
        elif v == "mirroring_delete":
            self.rt.clone_session_delete(self._number(a[0], where))
        elif v == "mc_node_update":
            self.rt.pre.node_update(self._number(a[0], where), [self._number(x, where) for x in a[1:]])
        elif v == "counter_read":
            self.rt.counter_read(a[0], num[0])
        elif v == "counter_write":
            self.rt.counter_write(a[0], num[0], num[1], num[2])
        elif v == "register_read":
            self.rt.register_read(a[0], num[0])
        elif v == "register_write":
            self.rt.register_write(a[0], num[0], num[1])
        elif v == "register_reset":
            self.rt.register_reset(a[0])
        elif v == "meter_get_rates":
            self.rt.meter_get(a[0], num[0])
        elif v in ("meter_set_rates", "meter_array_set_rates"):
            rates = a[2:] if v == "meter_set_rates" else a[1:]
            config = meter_config(rates, where)
            meter = self.rt.meter(a[0])
            indexes = [num[0]] if v == "meter_set_rates" else range(meter.size)
            for i in indexes:
                self.rt.meter_set(a[0], i, config)
        # mirroring_get: nothing to check

    @staticmethod
    def _number(tok: str, where: str) -> int:
        try:
            return int(tok, 0)
        except ValueError:
            raise StfError(f"{where}: bad number {tok!r}") from None

    def _check_counter(self, c: StfCommand, where: str, res: StfResult) -> None:
        check = parse_check_counter(c.text, where)
        if check.index in self._named_entries:  # a direct counter, by the entry's name
            table, key, priority = self._named_entries[check.index]
            pk, by = self.rt.direct_counter_read(table, key, priority)
        else:
            pk, by = self.rt.counter_read(check.name, self._number(check.index, where))
        failure = check.failure(pk, by, where)
        if failure:
            res.failures.append(failure)
