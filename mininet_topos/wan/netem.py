"""The netem backend: a WAN link made of the kernel's netem qdiscs.

Where the kernel has sch_netem, the link can be emulated in the kernel instead of by a
delay line process: netem on the egress of both interfaces, and a u32 filter with a
mirred redirect at each interface's ingress that hands every frame to the other side
(the forwarding the delay line does itself).  u32 and mirred rather than matchall:
they exist on more kernels (this one has no matchall).
"""
from __future__ import annotations

import contextlib
import functools
import json
import subprocess
from typing import Any

from common.loss import LossKind, LossModel

from ..delayline import WanError, WanParams
from .params import changed_params, params_from

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
    from common.kernel.netns import Namespace, NetnsError, unique_name

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
        self._params = params_from(self.name, params, shaping)
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
        new = changed_params(self._params, self.name, changes)
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
