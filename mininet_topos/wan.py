"""WAN links for the test bed: delay, jitter, rate and loss between two interfaces.

Why: experiments across datacenters need long, lossy links, and this kernel has no
netem.  :class:`WanLink` runs the user-space delay line (:mod:`.delayline`) between two
interfaces — in the root namespace or a named one — and hands its parameters and
counters back.  :class:`MininetWanLink` is the same as a Mininet link class: it puts two
veth pairs and a small private namespace between the two nodes::

    node1:intf1 <-veth-> wana [delay line in its namespace] wanb <-veth-> node2:intf2

Loss is applied inside the delay line by default (a per-direction Bernoulli or
Gilbert-Elliott process on the wire, after serialisation, seeded, counted exactly).
The eBPF dropper of ``ebpf.loss`` can take it instead (``loss_backend=EbpfLossBackend()``)
on links carrying plain IPv4; see :class:`EbpfLossBackend` for why it is not the default.

Use::

    with WanLink("wana", "wanb", delay_ms=10, jitter_ms=1, rate_mbps=100,
                 loss=LossModel.bursty(0.01), netns="wan1") as wan:
        ...
        wan.params()          # the WanParams configured
        wan.applied_params()  # the same, read back from the running delay line
        wan.stats()           # per-direction counters: rx, tx, lost, queue drops, lateness
        wan.update(loss=LossModel.none())   # live change
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

from controller.topology.model import Link, LossKind, LossModel

from .delayline import WanError, WanParams

__all__ = [
    "EbpfLossBackend",
    "LossBackend",
    "MininetMtuLink",
    "MininetWanLink",
    "WanError",
    "WanLink",
    "WanParams",
    "wan_params_for",
]

_PROJECT_ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 10.0


class LossBackend(Protocol):
    """Something that drops frames leaving ``ifname`` in namespace ``netns``.

    ``attach`` returns a handle with ``close()``; the WAN link then runs its delay line
    without loss and closes the handle on stop.
    """

    def attach(self, ifname: str, netns: str | None, model: LossModel,
               seed: int | None) -> Any: ...


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EbpfLossBackend:
    """Loss by the eBPF dropper of ``ebpf.loss`` at tc egress of the delay line's
    outgoing interface, instead of inside the delay line.

    Limits (why the in-line dropper is the default): the eBPF program only considers
    IPv4 frames, so frames carrying the link sequence header (fabric and WAN links
    between switches) always pass, and it draws from the kernel's random numbers, so
    ``seed`` has no effect.  It suits links that carry plain IPv4 (host to host).
    """

    udp_only: bool = False

    def attach(self, ifname: str, netns: str | None, model: LossModel,
               seed: int | None) -> Any:
        from ebpf.loss import LossEmulator

        em = LossEmulator(ifname, netns=netns, direction="egress",
                          udp_only=self.udp_only).attach()
        try:
            if model.kind is LossKind.BERNOULLI:
                em.set_bernoulli(model.p)
            elif model.kind is LossKind.GILBERT_ELLIOTT:
                em.set_gilbert_elliott(p_gb=model.p, p_bg=model.r, loss_good=1.0 - model.k,
                                       loss_bad=1.0 - model.h)
        except BaseException:
            em.close()
            raise
        return em


def wan_params_for(link: Link, *, seed: int | None = None, queue_pkts: int | None = None
                   ) -> WanParams:
    """The delay line parameters of a topology link (rate, delay, jitter, loss, queue)."""
    return WanParams(delay_ms=link.delay_ms, jitter_ms=link.jitter_ms,
                     rate_mbps=link.rate_mbps, loss=link.loss,
                     queue_pkts=queue_pkts if queue_pkts is not None else max(
                         link.queue_pkts, 1000),
                     seed=seed).check(f"link {link.name}")


class WanLink:
    """A delay line process between ``a_iface`` and ``b_iface`` (see module docstring).

    ``realtime`` runs the delay line with SCHED_FIFO priority (best effort), so a busy
    machine delays its wake-ups less; it sleeps whenever nothing is due, so it only
    takes the CPU its traffic needs.  ``stats()`` reports how late sends were
    (``late_max_us``, ``late_over_1ms_pkts``) to show when the machine was too busy.
    """

    def __init__(self, a_iface: str, b_iface: str, *, netns: str | None = None,
                 params: WanParams | None = None, loss_backend: LossBackend | None = None,
                 realtime: bool = True, **shaping: Any) -> None:
        if params is not None and shaping:
            raise WanError(f"WAN link {a_iface}-{b_iface}: give params or shaping "
                           f"keywords ({', '.join(shaping)}), not both")
        try:
            base = params if params is not None else WanParams(**shaping)
        except TypeError as exc:
            raise WanError(f"WAN link {a_iface}-{b_iface}: {exc}") from None
        self.a_iface, self.b_iface, self.netns = a_iface, b_iface, netns
        self._params = base.check(f"WAN link {a_iface}-{b_iface}")
        self._loss_backend = loss_backend
        self._loss_handles: dict[str, Any] = {}
        self._realtime = realtime
        self._proc: subprocess.Popen | None = None
        self._dir: Path | None = None
        self._seq = -1

    @property
    def name(self) -> str:
        return f"{self.a_iface}-{self.b_iface}"

    # -- life cycle -------------------------------------------------------------------
    def _line_params(self) -> WanParams:
        """What the delay line applies (no loss when a backend takes it)."""
        if self._loss_backend is None:
            return self._params
        return dataclasses.replace(self._params, loss=LossModel.none())

    def start(self) -> WanLink:
        """Start the delay line and wait until it is forwarding."""
        if self._proc is not None:
            raise WanError(f"WAN link {self.name}: already started")
        self._dir = Path(tempfile.mkdtemp(prefix="wanlink-"))
        params_file, stats_file = self._dir / "params.json", self._dir / "stats.json"
        params_file.write_text(json.dumps(self._line_params().to_dict()))
        argv = [sys.executable, "-m", "mininet_topos.delayline", "--a", self.a_iface,
                "--b", self.b_iface, "--params", str(params_file), "--stats", str(stats_file)]
        if self._realtime:
            argv.append("--realtime")
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
        try:
            self._proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + START_TIMEOUT_S
            while not stats_file.exists():
                if self._proc.poll() is not None:
                    err = (self._proc.stderr.read().decode(errors="replace").strip()
                           if self._proc.stderr else "")
                    raise WanError(f"WAN link {self.name}: delay line exited "
                                   f"{self._proc.returncode}: {err}")
                if time.monotonic() > deadline:
                    raise WanError(f"WAN link {self.name}: delay line not ready after "
                                   f"{START_TIMEOUT_S:g} s")
                time.sleep(0.01)
            self._seq = self._read_stats().get("seq", 0)
            if self._loss_backend is not None:
                # loss on the frames leaving each side of the delay line
                for direction, ifname in (("ab", self.b_iface), ("ba", self.a_iface)):
                    self._loss_handles[direction] = self._loss_backend.attach(
                        ifname, self.netns, self._params.loss, self._params.seed)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> dict[str, dict[str, int]]:
        """Stop the delay line (SIGTERM, then SIGKILL) and return its last counters."""
        last: dict[str, dict[str, int]] = {}
        for handle in self._loss_handles.values():
            with contextlib.suppress(Exception):
                handle.close()
        self._loss_handles.clear()
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
            if proc.stderr is not None:
                proc.stderr.close()
            with contextlib.suppress(Exception):
                last = self._directions(self._read_stats())
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        return last

    def __enter__(self) -> WanLink:  # noqa: PYI034 - returns the started link
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # -- parameters and counters --------------------------------------------------------
    def params(self) -> WanParams:
        """The parameters the link applies (loss included, whoever applies it)."""
        return self._params

    def update(self, **changes: Any) -> WanParams:
        """Change parameters live (frames already in flight keep their schedule)."""
        try:
            new = dataclasses.replace(self._params, **changes)
        except TypeError as exc:
            raise WanError(f"WAN link {self.name}: {exc}") from None
        new = new.check(f"WAN link {self.name}")
        if self._loss_backend is not None and new.loss != self._params.loss:
            raise WanError(f"WAN link {self.name}: loss is applied by the loss backend; "
                           "restart the link to change it")
        self._params = new
        if self._proc is not None:
            assert self._dir is not None
            tmp = self._dir / "params.json.tmp"
            tmp.write_text(json.dumps(self._line_params().to_dict()))
            os.replace(tmp, self._dir / "params.json")
            self._signal_and_wait(signal.SIGHUP)
        return new

    def applied_params(self) -> WanParams:
        """The parameters the running delay line reports it applies (read back from the
        process itself; without loss when a loss backend takes it)."""
        if self._proc is None:
            raise WanError(f"WAN link {self.name}: not running")
        return WanParams.from_dict(self._signal_and_wait(signal.SIGUSR1)["params"])

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        where = f" in {self.netns}" if self.netns else ""
        return f"<WanLink {self.name}{where} {state} {self._params}>"

    def stats(self) -> dict[str, dict[str, int]]:
        """Counters per direction, ``"ab"`` (a_iface to b_iface) and ``"ba"``."""
        if self._proc is None:
            raise WanError(f"WAN link {self.name}: not running")
        out = self._directions(self._signal_and_wait(signal.SIGUSR1))
        for direction, handle in self._loss_handles.items():
            counters = getattr(handle, "counters", None)
            if counters is not None and direction in out:
                out[direction]["lost"] = int(counters().dropped)
        return out

    @staticmethod
    def _directions(raw: dict[str, Any]) -> dict[str, dict[str, int]]:
        return {d: raw[d] for d in ("ab", "ba") if d in raw}

    def _read_stats(self) -> dict[str, Any]:
        assert self._dir is not None
        return json.loads((self._dir / "stats.json").read_text())

    def _signal_and_wait(self, sig: signal.Signals, timeout: float = 3.0) -> dict[str, Any]:
        assert self._proc is not None
        target = self._seq + 1
        # signal the delay line itself: with a namespace, our child is "ip netns exec",
        # which execs into python, so the PID is the same process
        self._proc.send_signal(sig)
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(ValueError, FileNotFoundError):
                raw = self._read_stats()
                if raw.get("seq", 0) >= target:
                    self._seq = raw["seq"]
                    return raw
            if self._proc.poll() is not None:
                raise WanError(f"WAN link {self.name}: delay line exited "
                               f"{self._proc.returncode}")
            if time.monotonic() > deadline:
                raise WanError(f"WAN link {self.name}: delay line did not answer "
                               f"{sig.name} within {timeout:g} s")
            time.sleep(0.005)


def _mininet_link_base() -> type:
    try:
        from mininet.link import Link as MnLink
    except ImportError:  # Mininet is optional for everything else in this module
        return object
    return MnLink


MIN_MTU, MAX_MTU = 576, 9000


class MininetMtuLink(_mininet_link_base()):  # type: ignore[misc]
    """A plain Mininet veth link whose two ends get the topology link's MTU.

    Mininet leaves every interface at 1500 bytes; fabric and WAN links need more room
    (link sequence header and INT stack), and a switch sending a larger frame than its
    port's MTU gets EMSGSIZE.
    """

    def __init__(self, node1: Any, node2: Any, *args: Any, mtu: int = 1500,
                 **kwargs: Any) -> None:
        if not MIN_MTU <= mtu <= MAX_MTU:
            raise WanError(f"link {node1}-{node2}: mtu {mtu} out of range {MIN_MTU}..{MAX_MTU}")
        self._mtu = mtu
        super().__init__(node1, node2, *args, **kwargs)
        for intf in (self.intf1, self.intf2):
            out = intf.node.cmd(f"ip link set dev {intf.name} mtu {mtu} 2>&1").strip()
            if out:
                raise WanError(f"link {self.intf1}-{self.intf2}: cannot set mtu {mtu} on "
                               f"{intf.name}: {out}")


class MininetWanLink(MininetMtuLink):
    """A Mininet link class with a delay line in the middle.

    ``net.addLink(s1, s2, port1=3, port2=3, cls=MininetWanLink, wan=WanParams(...),
    mtu=2000)``.  The nodes see ordinary interfaces; the delay line and its two
    interfaces live in a private namespace created for the link and removed with it.
    """

    def __init__(self, node1: Any, node2: Any, *args: Any, wan: WanParams | None = None,
                 realtime: bool = True, loss_backend: LossBackend | None = None,
                 **kwargs: Any) -> None:
        from .netns import Namespace, unique_name
        self._wan_params = (wan or WanParams()).check("WAN link")
        self._ns = Namespace.create("twnw")
        self._mid = unique_name("twm", 13)
        self.wan: WanLink | None = None
        try:
            super().__init__(node1, node2, *args, **kwargs)
            self.wan = WanLink(self._mid + "a", self._mid + "b", netns=self._ns.name,
                               params=self._wan_params, realtime=realtime,
                               loss_backend=loss_backend).start()
        except BaseException:
            self._ns.close()
            raise

    def makeIntfPair(self, intfname1: str, intfname2: str, addr1: str | None = None,
                     addr2: str | None = None, node1: Any = None, node2: Any = None,
                     deleteIntfs: bool = True) -> None:
        """Two veth pairs, node1 <-> namespace <-> node2, instead of one."""
        # Created from inside the link's namespace and moved to the node by PID: Mininet
        # hosts have their own mount namespace, where named namespaces are not visible.
        for intf, addr, node, mid in ((intfname1, addr1, node1, self._mid + "a"),
                                      (intfname2, addr2, node2, self._mid + "b")):
            target = str(node.pid) if node is not None else "1"
            mac = ["address", addr] if addr else []
            res = self._ns.run(["ip", "link", "add", "name", mid, "type", "veth", "peer",
                                "name", intf, *mac, "netns", target], check=False)
            if res.returncode != 0:
                raise WanError(f"WAN link {intfname1}-{intfname2}: cannot create {intf}: "
                               f"{res.stderr.strip()}")
            self._ns.run(["ip", "link", "set", mid, "mtu", str(self._mtu), "up"])
        self._ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"], check=False)

    def stop(self) -> None:
        if self.wan is not None:
            self.wan.stop()
        super().stop()
        self._ns.close()

    def delete(self) -> None:
        if self.wan is not None:
            self.wan.stop()
        with contextlib.suppress(Exception):
            super().delete()
        self._ns.close()

    def status(self) -> str:
        state = "running" if self.wan is not None and self.wan.running else "stopped"
        return f"{super().status()} wan {state}"

