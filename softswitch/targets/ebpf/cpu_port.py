"""The CPU port of a kernel switch: packet-in and packet-out through a veth pair.

Why a veth pair: the program already sends a frame to a port by redirecting it to
that port's interface, and runs on every frame a port's interface receives. So the
CPU port is one more port whose interface (``inner``) is one end of a veth pair in
the switch's namespace: a frame the program sends to the CPU port leaves ``inner``
and arrives at ``outer``, where the switch process reads it (a raw socket, as the
Python target's ports) and hands it to the P4Runtime server as a PacketIn (split at
the ``@controller_header("packet_in")`` header); a PacketOut is written to ``outer``,
arrives at ``inner`` and runs the program with ``ingress_port`` = the CPU port, the
``packet_out`` header in front, as on the Python target.

The pair carries nothing else: IPv6 (router solicitations, MLD) is off on both ends
and neither has an address. Its MTU is a jumbo frame's plus room for the headers.
"""
from __future__ import annotations

import logging
import os
import select
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from softswitch.switchd.ports import MAX_FRAME, RX_BUFFER, Port, in_netns

LOG = logging.getLogger("softswitch.ebpf")
MTU = MAX_FRAME + 64


class CpuLink:
    """A veth pair for the CPU port; `on_frame` gets each frame the program sends there."""

    def __init__(self, cpu_port: int, *, netns: str | None, tag: str | None = None) -> None:
        tag = tag or str(os.getpid() % 1_000_000)
        self.cpu_port = cpu_port
        self.netns = netns
        self.outer, self.inner = f"p4cpu{tag}o", f"p4cpu{tag}i"
        self.port: Port | None = None
        self.packet_ins = 0
        self.packet_outs = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _ip(self, *args: str, check: bool = True) -> None:
        res = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
        if check and res.returncode != 0:
            raise OSError(f"ip {' '.join(args)}: {res.stderr.strip()}")

    def create(self) -> None:
        """Make the pair in the switch's namespace (replacing a stale one) and open `outer`."""
        with in_netns(self.netns):
            self._ip("link", "del", self.outer, check=False)
            self._ip("link", "add", self.outer, "mtu", str(MTU), "type", "veth",
                     "peer", "name", self.inner, "mtu", str(MTU))
            try:
                for ifname in (self.outer, self.inner):
                    conf = Path(f"/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6")
                    if conf.exists():
                        conf.write_text("1\n")
                    self._ip("link", "set", ifname, "up")
                self.port = Port.open(self.cpu_port, self.outer)
            except BaseException:
                self._ip("link", "del", self.outer, check=False)
                raise

    def start(self, on_frame: Callable[[bytes], None]) -> None:
        """Read `outer` in a thread until `close`: each frame to `on_frame`."""
        def run() -> None:
            port = self.port
            assert port is not None
            buf = bytearray(RX_BUFFER)
            view = memoryview(buf)
            while not self._stop.is_set():
                ready, _, _ = select.select([port.rx], [], [], 0.2)
                if not ready:
                    continue
                while (frame := port.receive(buf, view)) is not None:
                    self.packet_ins += 1
                    try:
                        on_frame(frame)
                    except Exception as exc:  # noqa: BLE001 - one bad frame must not stop the port
                        LOG.warning("cpu port: packet-in dropped: %s", exc)

        self._thread = threading.Thread(target=run, name="ebpf-cpu-port", daemon=True)
        self._thread.start()

    def send(self, frame: bytes) -> bool:
        """A packet-out frame into the program (ingress on the CPU port)."""
        if self.port is None:
            return False
        self.packet_outs += 1
        return self.port.transmit(frame)

    def close(self) -> None:
        """Stop reading, close the socket, delete the pair."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
            self._thread = None
        if self.port is not None:
            self.port.close()
            self.port = None
            with in_netns(self.netns):
                self._ip("link", "del", self.outer, check=False)
