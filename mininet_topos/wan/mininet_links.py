"""WAN and MTU links as Mininet link classes.
"""
from __future__ import annotations

import contextlib
from typing import Any

from ..delayline import WanError, WanParams
from .backends import make_wan_link
from .delayline_link import WanLink
from .loss_backends import LossBackend
from .netem import NetemWan


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
        from common.kernel.netns import Namespace, unique_name
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
