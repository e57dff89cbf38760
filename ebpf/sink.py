"""The host INT sink: load ``int_sink.c`` at tc clsact ingress, read records and counters.

Usage::

    with IntSink("eth0", netns="h2") as sink:
        records = sink.read(timeout_s=1.0)      # HOST_RECORD_DTYPE array
        flows = sink.flows()                     # FLOW_DTYPE array
        counters = sink.stats()                  # {SinkStat: count}

What the kernel side does, and what it does with malformed INT, is described at the
top of ``int_sink.c``; ``SinkStat`` names the counters.
"""

from __future__ import annotations

import dataclasses
import os
import time
from types import TracebackType
from typing import Self, TextIO

import numpy as np

from common.kernel.errors import AttachError
from common.kernel.setns import in_netns
from common.kernel.tc import TcAttachment, attach_tc
from formats.int_md import HOST_RECORD_DTYPE, INT_UDP_PORT

from .errors import ConfigError
from .flush import flush_runs
from .loader import compile_program
from .maps import lookup_all
from .records import FLOW_DTYPE, FLOW_KEY_DTYPE, FLOW_STATS_DTYPE, SinkStat, flow_value_dtype
from .ringbuf import RingBufReader

__all__ = ["IntSink", "SinkConfig"]

CLOCK_MONOTONIC_COARSE = 6
"""Linux's clock id of bpf_ktime_get_coarse_ns (the time module does not name it)."""
RUN_MAX_PACKETS = 65535
"""RUN_MAX_PACKETS of int_formats.h: a run's packet count has 24 bits, kept far below."""


@dataclasses.dataclass(slots=True, kw_only=True, frozen=True)
class SinkConfig:
    """Compile-time parameters of the sink (checked here, passed as -D cflags)."""

    int_udp_port: int = INT_UDP_PORT
    ringbuf_pages: int = 1024
    """Ring size in pages (power of two); 1024 pages (4 MiB) hold 7943 records of 528 B."""
    flow_entries: int = 65536
    malformed_drop: bool = False
    """Drop malformed INT at the sink instead of passing it up unmodified."""
    prio: int = 20
    """tc priority (the loss emulator uses 5, so it sees packets first)."""
    hook: str = "tc"
    """"tc" (clsact ingress, default) or "xdp" (before any tc program, loss included)."""
    xdp_flags: int = 0
    """XDP attach flags: 0 lets the kernel pick driver mode; 2 forces generic (skb) mode."""
    echo: bool = False
    """Echo INT in ACKs (formats.int_echo): keep each QP's latest hops and append them
    to its outgoing ACKs from a tc egress program, for senders running HPCC."""
    echo_entries: int = 16384
    echo_prio: int = 20
    """tc priority of the echo program at egress."""
    run_packets: int = 16
    """Packets of a flow one host record covers at most (consecutive PSNs, see
    ``formats.int_md.HOST_RECORD_DTYPE``); 1: a record per INT packet."""
    run_ns: int = 1_000_000
    """A run older than this closes at its next packet (the clock is the kernel's
    tick: runs end at most a tick, 4 ms at HZ=250, after this)."""
    flush_idle_ns: int = 50_000_000
    """``flush_idle_runs`` records the open runs of flows idle this long."""
    bench_omit: int = 0
    """For ``bench.bench_ebpf --profile`` only: parts of the program left out (BENCH_OMIT
    bits in int_sink.c), to measure what each costs. Never set it elsewhere."""

    def __post_init__(self) -> None:
        if not 1 <= self.int_udp_port <= 0xFFFF:
            raise ConfigError(f"int_udp_port {self.int_udp_port}: expected 1..65535")
        p = self.ringbuf_pages
        if p < 1 or p & (p - 1) or p > 1 << 18:
            raise ConfigError(f"ringbuf_pages {p}: expected a power of two in 1..262144")
        if not 1 <= self.echo_entries <= 1 << 22:
            raise ConfigError(f"echo_entries {self.echo_entries}: expected 1..4194304")
        if not 1 <= self.flow_entries <= 1 << 22:
            raise ConfigError(f"flow_entries {self.flow_entries}: expected 1..4194304")
        if not 1 <= self.run_packets <= RUN_MAX_PACKETS:
            raise ConfigError(f"run_packets {self.run_packets}: expected 1..{RUN_MAX_PACKETS}")
        if not 1 <= self.run_ns <= 1 << 40:
            raise ConfigError(f"run_ns {self.run_ns}: expected 1..{1 << 40}")
        if self.flush_idle_ns < 0:
            raise ConfigError(f"flush_idle_ns {self.flush_idle_ns}: expected >= 0")
        if self.hook not in ("tc", "xdp"):
            raise ConfigError(f"hook {self.hook!r}: expected 'tc' or 'xdp'")
        if self.echo and self.hook != "tc":
            raise ConfigError("echo needs the tc hook (its egress half is a tc program)")
        if self.xdp_flags not in (0, 1, 2, 4):
            raise ConfigError(f"xdp_flags {self.xdp_flags}: expected 0, 1 (update if none), "
                              "2 (generic) or 4 (driver)")

    def defines(self) -> dict[str, int]:
        return {"INT_UDP_PORT": self.int_udp_port, "RINGBUF_PAGES": self.ringbuf_pages,
                "FLOW_ENTRIES": self.flow_entries, "MALFORMED_DROP": int(self.malformed_drop),
                "SINK_XDP": int(self.hook == "xdp"), "INT_ECHO": int(self.echo),
                "ECHO_ENTRIES": self.echo_entries, "RUN_PACKETS": self.run_packets,
                "RUN_NS": self.run_ns,
                **({"BENCH_OMIT": self.bench_omit} if self.bench_omit else {})}


class IntSink:
    """INT sink on one interface (optionally inside a named network namespace)."""

    def __init__(self, iface: str, *, netns: str | None = None,
                 config: SinkConfig | None = None, dump_source: TextIO | None = None) -> None:
        self.iface = iface
        self.netns = netns
        self.config = config or SinkConfig()
        self._dump = dump_source
        self._bpf = None
        self._tc: TcAttachment | None = None
        self._echo_tc: TcAttachment | None = None
        self._echo_fd = -1
        self._ring: RingBufReader | None = None
        self._prog_fd = -1
        self._flush_fd = -1
        self._xdp_attached = False

    # -- lifecycle -----------------------------------------------------------------
    def attach(self) -> Self:
        """Compile, load and attach; on any failure nothing stays attached."""
        if self._bpf is not None:
            return self
        bpf = compile_program("int_sink.c", self.config.defines(), dump_source=self._dump)
        try:
            from bcc import BPF
            xdp = self.config.hook == "xdp"
            fn = bpf.load_func(b"int_sink_xdp" if xdp else b"int_sink",
                               BPF.XDP if xdp else BPF.SCHED_CLS)
            self._prog_fd = fn.fd
            self._flush_fd = bpf.load_func(b"int_sink_flush", BPF.SCHED_CLS).fd
            table = bpf[b"records"]
            self._ring = RingBufReader(table.map_fd, table.max_entries, HOST_RECORD_DTYPE)
            if xdp:
                with in_netns(self.netns):
                    BPF.attach_xdp(os.fsencode(self.iface), fn, self.config.xdp_flags)
                self._xdp_attached = True
            else:
                self._tc = attach_tc(fn.fd, "int_sink", self.iface, netns=self.netns,
                                     direction="ingress", prio=self.config.prio)
            if self.config.echo:
                efn = bpf.load_func(b"int_echo_egress", BPF.SCHED_CLS)
                self._echo_fd = efn.fd
                self._echo_tc = attach_tc(efn.fd, "int_echo", self.iface, netns=self.netns,
                                          direction="egress", prio=self.config.echo_prio)
        except Exception as exc:
            self._bpf = bpf
            self.close()
            if isinstance(exc, AttachError):
                raise
            raise AttachError(f"cannot load int_sink for {self.iface}: {exc}") from None
        self._bpf = bpf
        return self

    def detach(self) -> None:
        """Stop seeing packets (maps and the ring stay readable until ``close``)."""
        try:
            if self._echo_tc is not None:
                self._echo_tc.detach()
            if self._tc is not None:
                self._tc.detach()
            if self._xdp_attached:
                self._xdp_attached = False
                self._detach_xdp()
        finally:
            self._tc = self._echo_tc = None

    def stop(self) -> np.ndarray:
        """Detach, record every open run, and return the records not read yet: after
        this every packet the sink stripped is in a record that was handed out."""
        self._need()
        self.detach()
        assert self._ring is not None
        out = []
        while True:  # a full ring leaves runs open: read, then flush the rest
            flushed = self.flush_runs(idle_ns=0)
            out.append(self._ring.read())
            if not flushed and not out[-1].size:
                return np.concatenate(out)

    def close(self) -> None:
        """Detach from tc and free the programs and maps; safe to call twice."""
        try:
            self.detach()
        finally:
            if self._ring is not None:
                self._ring.close()
                self._ring = None
            if self._bpf is not None:
                self._bpf.cleanup()
                self._bpf = None

    def _detach_xdp(self) -> None:
        from bcc import BPF
        try:
            with in_netns(self.netns):
                BPF.remove_xdp(os.fsencode(self.iface), self.config.xdp_flags)
        except AttachError:
            pass  # the namespace is gone, and the program with it
        except Exception as exc:  # noqa: BLE001 - bcc raises bare Exception
            if "No such device" not in str(exc) and "does not exist" not in str(exc):
                raise AttachError(f"cannot remove XDP from {self.iface}: {exc}") from None

    @property
    def attached(self) -> bool:
        """Loaded (``attach`` done, ``close`` not yet)."""
        return self._bpf is not None

    def __enter__(self) -> Self:
        return self.attach()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _need(self):
        if self._bpf is None or self._ring is None:
            raise AttachError(f"int_sink on {self.iface} is not attached (call attach())")
        return self._bpf

    # -- data ----------------------------------------------------------------------
    def wait(self, timeout_s: float, extra_fds: tuple[int, ...] = ()) -> bool:
        """Block up to ``timeout_s`` for records or input on ``extra_fds``."""
        self._need()
        assert self._ring is not None
        return self._ring.wait(timeout_s, extra_fds)

    def read(self, timeout_s: float = 0.0, max_records: int = 1 << 16) -> np.ndarray:
        """Host records captured since the last read (waits up to ``timeout_s`` for one)."""
        self._need()
        assert self._ring is not None
        if timeout_s > 0:
            self._ring.wait(timeout_s)
        return self._ring.read(max_records)

    def stats(self) -> dict[SinkStat, int]:
        """Packet counters by class, summed over CPUs."""
        table = self._need()[b"stats"]
        out = {}
        for s in SinkStat:
            out[s] = int(sum(table[table.Key(int(s))]))
        return out

    def flows(self) -> np.ndarray:
        """Per-flow state as a ``FLOW_DTYPE`` array (one row per flow seen; packets
        and int_packets include the open run's, which the kernel adds when it closes)."""
        keys, values = lookup_all(self._need()[b"flows"], FLOW_KEY_DTYPE,
                                  flow_value_dtype(self.config.echo))
        values = values.astype(FLOW_STATS_DTYPE)
        # the kernel adds a run's packets when the run closes: add the open runs'
        open_run = (values["run"] >> np.uint64(24)) & np.uint64(0xFFFFFF)
        values["packets"] += open_run
        values["int_packets"] += open_run
        out = np.zeros(len(keys), FLOW_DTYPE)
        out["key"] = keys
        out["stats"] = values
        return out

    def echo_entries(self) -> dict[tuple[int, int, int], tuple[int, bytes]]:
        """The echo map: (peer IP, local IP, QP) -> (PSN, echo bytes as appended)."""
        bpf = self._need()
        if not self.config.echo:
            return {}
        out = {}
        flows = bpf[b"flows"]
        for k, fk in bpf[b"echo"].items():
            try:
                e = flows[fk].echo  # the QP's data flow holds the hops
            except KeyError:
                continue
            if e.len:
                out[(k.peer_ip, k.local_ip, k.qp)] = (e.psn, bytes(e.bytes)[:e.len])
        return out

    def echo_run_stats(self) -> tuple[int, int]:
        """(run_time_ns, run_cnt) of the echo program (needs kernel.bpf_stats_enabled)."""
        from .progstats import prog_run_stats
        self._need()
        return prog_run_stats(self._echo_fd)

    def flush_runs(self, idle_ns: int | None = None) -> int:
        """Record the open runs of flows that saw no packet for ``idle_ns`` (default
        ``config.flush_idle_ns``; 0: every open run), so an idle flow's last packets
        reach the ring; returns the runs recorded. The kernel swaps each run out
        atomically (int_sink_flush), so a packet arriving meanwhile is never lost nor
        recorded twice: it starts a new run."""
        bpf = self._need()
        idle = self.config.flush_idle_ns if idle_ns is None else idle_ns
        keys, values = lookup_all(bpf[b"flows"], FLOW_KEY_DTYPE,
                                  flow_value_dtype(self.config.echo))
        if not keys.size:
            return 0
        now = time.clock_gettime_ns(CLOCK_MONOTONIC_COARSE)
        pick = (values["run"] != 0) & (values["run_last_ns"].astype(np.int64) <= now - idle)
        return flush_runs(self._flush_fd, keys[pick])

    def clear_flows(self) -> None:
        """Forget per-flow state (e.g. between experiments); open runs are recorded
        first (a packet racing the clear may still start a run that is then lost)."""
        self.flush_runs(idle_ns=0)
        self._need()[b"flows"].clear()

    def run_stats(self) -> tuple[int, int]:
        """(run_time_ns, run_cnt) of the sink program (needs kernel.bpf_stats_enabled)."""
        from .progstats import prog_run_stats
        self._need()
        return prog_run_stats(self._prog_fd)

    @property
    def records_read(self) -> int:
        return self._ring.records_read if self._ring else 0
