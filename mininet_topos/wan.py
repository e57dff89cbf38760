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

Where the kernel has netem, :class:`NetemWan` does the same job in the kernel (netem on
both egresses, a u32/mirred redirect between the two interfaces), with the same methods.
:func:`make_wan_link` and :class:`MininetWanLink` take ``backend="auto"|"delayline"|
"netem"``: ``auto`` (the default) uses netem when :func:`netem_available` says the
kernel has it and netem can apply the parameters as the delay line would, else the
delay line; ``netem`` on a kernel without it raises :class:`NetemUnavailableError`
quoting the kernel's answer.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
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
    "BACKENDS",
    "EbpfLossBackend",
    "LossBackend",
    "MininetMtuLink",
    "MininetWanLink",
    "NetemUnavailableError",
    "NetemWan",
    "WanError",
    "WanLink",
    "WanParams",
    "make_wan_link",
    "netem_args",
    "netem_available",
    "netem_params_from_tc",
    "netem_unavailable_reason",
    "netem_unsupported",
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


def _changed_params(params: WanParams, name: str, changes: dict[str, Any]) -> WanParams:
    """``params`` with ``changes`` applied and checked (errors name the link), for the
    live ``update`` of either backend."""
    try:
        new = dataclasses.replace(params, **changes)
    except TypeError as exc:
        raise WanError(f"WAN link {name}: {exc}") from None
    return new.check(f"WAN link {name}")


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
        new = _changed_params(self._params, self.name, changes)
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


# -- netem ------------------------------------------------------------------------------
# Where the kernel has sch_netem, the link can be emulated in the kernel instead of by a
# delay line process: netem on the egress of both interfaces, and a u32 filter with a
# mirred redirect at each interface's ingress that hands every frame to the other side
# (the forwarding the delay line does itself).  u32 and mirred rather than matchall:
# they exist on more kernels (this one has no matchall).

NETEM_FILTER_PREF = "7"


class NetemUnavailableError(WanError):
    """netem was asked for explicitly, but the kernel cannot add a netem qdisc."""


@functools.cache
def netem_unavailable_reason() -> str | None:
    """Why netem cannot be used here (the kernel's answer), or None when it can.

    Probed once per process by adding a netem qdisc to a veth inside a throwaway
    namespace: the veth is created from inside it, so the root namespace is never
    touched, and everything goes with the namespace.
    """
    from .netns import Namespace, NetnsError, unique_name

    try:
        ns = Namespace.create("twnp")
    except NetnsError as exc:
        return f"cannot create a namespace to probe for netem: {exc}"
    with ns:
        base = unique_name("twnp", 13)
        res = ns.run(["ip", "link", "add", base + "a", "type", "veth", "peer", "name",
                      base + "b"], check=False)
        if res.returncode != 0:
            return f"cannot create a veth to probe for netem: {res.stderr.strip()}"
        res = ns.run(["tc", "qdisc", "add", "dev", base + "a", "root", "netem", "delay",
                      "1ms"], check=False)
        if res.returncode != 0:
            answer = " ".join(res.stderr.split()) or f"exit status {res.returncode}"
            return f"tc qdisc add ... netem failed: {answer}"
    return None


def netem_available() -> bool:
    """True when the kernel can add a netem qdisc (see :func:`netem_unavailable_reason`)."""
    return netem_unavailable_reason() is None


def netem_unsupported(params: WanParams) -> str | None:
    """Why netem cannot apply ``params`` as the delay line would, or None.

    netem keeps frames in time order, so jitter reorders them; the delay line keeps
    order unless ``reorder`` is set.  ``seed`` has no netem equivalent in the iproute2
    this project targets: with netem, loss draws from the kernel's random numbers.
    """
    if params.jitter_ms > 0.0 and not params.reorder:
        return (f"jitter_ms {params.jitter_ms} without reorder: netem reorders frames "
                "under jitter (set reorder=True or use the delay line)")
    return None


def _percent(fraction: float) -> str:
    return f"{fraction * 100.0:.10g}%"


def netem_args(ifname: str, params: WanParams, *, netns: str | None = None) -> list[str]:
    """The ``tc qdisc replace dev IF root netem ...`` command line for ``params``.

    Units: delay and jitter in whole microseconds, rate in bit/s (netem counts frame
    bytes without FCS, as the delay line does), loss in percent, ``limit`` = queue_pkts.
    Gilbert-Elliott: our ``h``/``k`` are the chances a frame is *delivered* in the
    bad/good state, while netem's ``gemodel p r 1-h 1-k`` takes the chances it is
    *lost* (tc turns 1-h into the kernel's h itself), so we pass 1-h and 1-k.
    Jitter is uniform (netem's default without ``distribution``), as in the delay line.
    Raises WanError when netem cannot express ``params`` (see :func:`netem_unsupported`).
    """
    params = params.check(f"netem on {ifname}")
    why = netem_unsupported(params)
    if why is not None:
        raise WanError(f"netem on {ifname}: {why}")
    argv = ["tc", *(["-n", netns] if netns else []), "qdisc", "replace", "dev", ifname,
            "root", "netem", "limit", str(params.queue_pkts),
            "delay", f"{round(params.delay_ms * 1000)}us"]
    if params.jitter_ms > 0.0:
        argv.append(f"{round(params.jitter_ms * 1000)}us")
    loss = params.loss
    if loss.kind is LossKind.BERNOULLI:
        argv += ["loss", "random", _percent(loss.p)]
    elif loss.kind is LossKind.GILBERT_ELLIOTT:
        argv += ["loss", "gemodel", _percent(loss.p), _percent(loss.r),
                 _percent(1.0 - loss.h), _percent(1.0 - loss.k)]
    if params.rate_mbps > 0.0:
        argv += ["rate", f"{round(params.rate_mbps * 1e6)}bit"]
    return argv


def netem_params_from_tc(options: dict[str, Any], *, reorder: bool = False) -> WanParams:
    """The WanParams a netem qdisc applies, from the ``options`` of ``tc -j qdisc show``.

    tc prints times in seconds, percentages as fractions, the rate in bytes/s and the
    Gilbert-Elliott bad-state value as "1-h" (a loss chance); values are rounded to what
    :func:`netem_args` can set (microseconds, bits/s, 1e-9).  ``reorder`` is not a netem
    setting (netem always reorders under jitter) and is passed through; ``seed`` is None.
    """
    delay = options.get("delay") or {}
    rate = options.get("rate") or {}

    def frac(raw: Any) -> float:
        return round(float(raw), 9)

    if "loss-gemodel" in options:
        ge = options["loss-gemodel"]
        loss = LossModel.gilbert_elliott(p=frac(ge["p"]), r=frac(ge["r"]),
                                         h=frac(1.0 - float(ge["1-h"])),
                                         k=frac(1.0 - float(ge["1-k"])))
    elif "loss-random" in options and float(options["loss-random"].get("loss", 0.0)) > 0:
        loss = LossModel.bernoulli(frac(options["loss-random"]["loss"]))
    else:
        loss = LossModel.none()
    return WanParams(delay_ms=round(float(delay.get("delay", 0.0)) * 1e6) / 1000,
                     jitter_ms=round(float(delay.get("jitter", 0.0)) * 1e6) / 1000,
                     rate_mbps=float(rate.get("rate", 0)) * 8 / 1e6,
                     loss=loss, queue_pkts=int(options.get("limit", 1000)),
                     reorder=reorder, seed=None)


class NetemWan:
    """A WAN link between ``a_iface`` and ``b_iface`` made of netem qdiscs (same
    interface as :class:`WanLink`; see the netem section above for how frames cross).

    Direction ``"ab"`` is shaped on ``b_iface``'s egress, ``"ba"`` on ``a_iface``'s.
    ``applied_params()`` reads both qdiscs back from the kernel and insists they agree.
    """

    def __init__(self, a_iface: str, b_iface: str, *, netns: str | None = None,
                 params: WanParams | None = None, **shaping: Any) -> None:
        self.a_iface, self.b_iface, self.netns = a_iface, b_iface, netns
        self._params = _params_from(self.name, params, shaping)
        why = netem_unsupported(self._params)
        if why is not None:
            raise WanError(f"WAN link {self.name} (netem): {why}")
        self._started = False

    @property
    def name(self) -> str:
        return f"{self.a_iface}-{self.b_iface}"

    @property
    def running(self) -> bool:
        return self._started

    @property
    def pid(self) -> None:
        return None  # no process: the kernel does the work

    def _tc(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        argv = ["tc", *(["-n", self.netns] if self.netns else []), *args]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
        if check and res.returncode != 0:
            raise WanError(f"WAN link {self.name} (netem): {' '.join(argv)} exited "
                           f"{res.returncode}: {' '.join(res.stderr.split())}")
        return res

    def _directions(self) -> tuple[tuple[str, str, str], ...]:
        """(direction, ingress interface, egress interface)."""
        return (("ab", self.a_iface, self.b_iface), ("ba", self.b_iface, self.a_iface))

    def _apply(self) -> None:
        for _, _, out in self._directions():
            res = subprocess.run(netem_args(out, self._params, netns=self.netns),
                                 capture_output=True, text=True, timeout=10, check=False)
            if res.returncode != 0:
                raise WanError(f"WAN link {self.name} (netem): cannot set netem on {out}: "
                               f"{' '.join(res.stderr.split())}")

    def start(self) -> NetemWan:
        """Put netem on both egresses and the redirects at both ingresses."""
        if self._started:
            raise WanError(f"WAN link {self.name}: already started")
        self._started = True
        try:
            self._apply()
            for _, into, out in self._directions():
                self._tc("qdisc", "replace", "dev", into, "clsact")
                self._tc("filter", "replace", "dev", into, "ingress", "pref",
                         NETEM_FILTER_PREF, "u32", "match", "u32", "0", "0",
                         "action", "mirred", "egress", "redirect", "dev", out)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> dict[str, dict[str, int]]:
        """Remove the qdiscs and filters (missing ones are fine); return the last counters."""
        if not self._started:
            return {}
        last: dict[str, dict[str, int]] = {}
        with contextlib.suppress(Exception):
            last = self.stats()
        self._started = False
        for _, into, out in self._directions():
            self._tc("qdisc", "del", "dev", into, "clsact", check=False)
            self._tc("qdisc", "del", "dev", out, "root", check=False)
        return last

    def __enter__(self) -> NetemWan:  # noqa: PYI034 - returns the started link
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def params(self) -> WanParams:
        return self._params

    def update(self, **changes: Any) -> WanParams:
        """Change parameters live (``tc qdisc replace`` on both sides)."""
        new = _changed_params(self._params, self.name, changes)
        why = netem_unsupported(new)
        if why is not None:
            raise WanError(f"WAN link {self.name} (netem): {why}")
        old, self._params = self._params, new
        if self._started:
            try:
                self._apply()
            except BaseException:
                self._params = old
                with contextlib.suppress(Exception):
                    self._apply()
                raise
        return new

    def _root_qdisc(self, ifname: str, *, stats: bool = False) -> dict[str, Any]:
        if not self._started:
            raise WanError(f"WAN link {self.name}: not running")
        res = self._tc(*(["-s"] if stats else []), "-j", "qdisc", "show", "dev", ifname)
        try:
            entries = json.loads(res.stdout or "[]")
        except ValueError as exc:
            raise WanError(f"WAN link {self.name}: tc printed unreadable JSON for "
                           f"{ifname}: {exc}") from None
        for entry in entries:
            if entry.get("root") and entry.get("kind") == "netem":
                return entry
        raise WanError(f"WAN link {self.name}: no netem root qdisc on {ifname} "
                       f"(found {[e.get('kind') for e in entries]})")

    def applied_params(self) -> WanParams:
        """The parameters the kernel reports for both directions (they must agree)."""
        got = {d: netem_params_from_tc(self._root_qdisc(out).get("options", {}),
                                       reorder=self._params.reorder)
               for d, _, out in self._directions()}
        if got["ab"] != got["ba"]:
            raise WanError(f"WAN link {self.name}: directions differ: ab {got['ab']}, "
                           f"ba {got['ba']}")
        return got["ab"]

    def stats(self) -> dict[str, dict[str, int]]:
        """Counters per direction from the netem qdiscs.  netem counts its random
        losses and its tail drops together, so ``lost`` includes queue drops."""
        out: dict[str, dict[str, int]] = {}
        for direction, _, egress in self._directions():
            q = self._root_qdisc(egress, stats=True)
            out[direction] = {"tx_pkts": int(q.get("packets", 0)),
                              "tx_bytes": int(q.get("bytes", 0)),
                              "lost": int(q.get("drops", 0)),
                              "backlog_pkts": int(q.get("qlen", 0))}
        return out

    def __repr__(self) -> str:
        state = "running" if self._started else "stopped"
        where = f" in {self.netns}" if self.netns else ""
        return f"<NetemWan {self.name}{where} {state} {self._params}>"


BACKENDS = ("auto", "delayline", "netem")


def make_wan_link(a_iface: str, b_iface: str, *, backend: str = "auto",
                  netns: str | None = None, params: WanParams | None = None,
                  loss_backend: LossBackend | None = None, realtime: bool = True,
                  **shaping: Any) -> WanLink | NetemWan:
    """A WAN link (not started) by the chosen backend.

    ``"delayline"``: :class:`WanLink`.  ``"netem"``: :class:`NetemWan`, or
    :class:`NetemUnavailableError` with the kernel's answer where netem is missing.
    ``"auto"``: netem when the kernel has it and it can apply the parameters exactly as
    the delay line would (no loss backend, no jitter without reorder, no ``seed``: a
    seeded link is asked to replay its loss sequence, which netem cannot), else the
    delay line.
    """
    name = f"{a_iface}-{b_iface}"
    if backend not in BACKENDS:
        raise WanError(f"WAN link {name}: backend {backend!r} is not one of "
                       f"{', '.join(BACKENDS)}")
    base = _params_from(name, params, shaping)
    if backend == "netem":
        reason = netem_unavailable_reason()
        if reason is not None:
            raise NetemUnavailableError(f"WAN link {name}: backend 'netem' asked for, but "
                                        f"the kernel has no netem: {reason}")
        if loss_backend is not None:
            raise WanError(f"WAN link {name}: a loss backend works with the delay line "
                           "only; netem applies the loss itself")
        return NetemWan(a_iface, b_iface, netns=netns, params=base)
    if (backend == "auto" and loss_backend is None and base.seed is None
            and netem_unsupported(base) is None and netem_available()):
        return NetemWan(a_iface, b_iface, netns=netns, params=base)
    return WanLink(a_iface, b_iface, netns=netns, params=base, loss_backend=loss_backend,
                   realtime=realtime)


def _params_from(name: str, params: WanParams | None, shaping: dict[str, Any]) -> WanParams:
    """``params`` or WanParams(**shaping) (not both), checked; errors name the link."""
    if params is not None and shaping:
        raise WanError(f"WAN link {name}: give params or shaping keywords "
                       f"({', '.join(shaping)}), not both")
    try:
        base = params if params is not None else WanParams(**shaping)
    except TypeError as exc:
        raise WanError(f"WAN link {name}: {exc}") from None
    return base.check(f"WAN link {name}")


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
    ``backend`` picks the delay line or netem as :func:`make_wan_link` does.
    """

    def __init__(self, node1: Any, node2: Any, *args: Any, wan: WanParams | None = None,
                 realtime: bool = True, loss_backend: LossBackend | None = None,
                 backend: str = "auto", **kwargs: Any) -> None:
        from .netns import Namespace, unique_name
        self._wan_params = (wan or WanParams()).check("WAN link")
        self._ns = Namespace.create("twnw")
        self._mid = unique_name("twm", 13)
        self.wan: WanLink | NetemWan | None = None
        try:
            # chosen before the interfaces exist, so a bad backend leaves nothing behind
            wan_link = make_wan_link(self._mid + "a", self._mid + "b", backend=backend,
                                     netns=self._ns.name, params=self._wan_params,
                                     realtime=realtime, loss_backend=loss_backend)
            super().__init__(node1, node2, *args, **kwargs)
            self.wan = wan_link.start()
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

