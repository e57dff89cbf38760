"""Attach a loaded BPF program to tc clsact ingress/egress, and detach it for sure.

A ``TcAttachment`` remembers whether it created the clsact qdisc: if it did, detaching
removes the qdisc (and with it every filter); if the qdisc was there before (another
program shares the interface, e.g. the loss emulator and the INT sink), only our filter
goes, found by its priority.  Lower ``prio`` runs first.  A filter with our name at
our priority is a leftover of a process killed before it could detach (SIGKILL, crash):
attaching replaces it, so a restarted agent never runs behind a stale copy.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Literal

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from common.kernel.errors import AttachError
from common.kernel.setns import in_netns

__all__ = ["Direction", "TcAttachment", "attach_tc"]

Direction = Literal["ingress", "egress"]
_PARENTS = {"ingress": "ffff:fff2", "egress": "ffff:fff3"}


def _where(ifname: str, netns: str | None) -> str:
    return f"{ifname} in namespace {netns}" if netns else f"{ifname}"


def _open(ifname: str, netns: str | None) -> tuple[IPRoute, int]:
    with in_netns(netns):
        ipr = IPRoute()
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        ipr.close()
        raise AttachError(f"interface {_where(ifname, netns)} not found")
    return ipr, found[0]


@dataclasses.dataclass(slots=True, kw_only=True)
class TcAttachment:
    """One BPF program on one interface's clsact hook."""

    ifname: str
    netns: str | None
    direction: Direction
    prio: int
    ifindex: int
    created_qdisc: bool
    name: str
    attached: bool = True

    def detach(self) -> None:
        """Remove our filter (or the clsact qdisc we created); safe to call twice."""
        if not self.attached:
            return
        self.attached = False
        try:
            ipr, idx = _open(self.ifname, self.netns)
        except AttachError:
            return  # interface (or namespace) already gone: nothing left behind
        with ipr:
            try:
                if self.created_qdisc:
                    ipr.tc("del", "clsact", idx)
                else:
                    ipr.tc("del-filter", "bpf", idx, parent=_PARENTS[self.direction],
                           prio=self.prio)
            except NetlinkError as exc:
                if exc.code not in (2, 19, 22):  # ENOENT, ENODEV, EINVAL: already gone
                    raise AttachError(
                        f"cannot detach {self.name} from {_where(self.ifname, self.netns)} "
                        f"{self.direction}: {exc}") from None


def _leftovers(ipr: IPRoute, idx: int, parent: str, name: str, prio: int) -> bool:
    """True when a filter called ``name`` already sits at ``prio`` (a crashed run's)."""
    parent_id = int(parent.replace(":", ""), 16)
    try:
        filters = ipr.get_filters(index=idx, parent=parent_id)
    except NetlinkError:
        return False
    for f in filters:
        opts = f.get_attr("TCA_OPTIONS")
        if (f.get_attr("TCA_KIND") == "bpf" and opts is not None
                and opts.get_attr("TCA_BPF_NAME") == name and f["info"] >> 16 == prio):
            return True
    return False


def attach_tc(fd: int, name: str, ifname: str, *, netns: str | None = None,
              direction: Direction = "ingress", prio: int = 10) -> TcAttachment:
    """Attach program ``fd`` (direct action) at clsact ``direction`` of ``ifname``."""
    if direction not in _PARENTS:
        raise AttachError(f"tc direction {direction!r}: expected 'ingress' or 'egress'")
    if not 1 <= prio <= 0xFFFF:
        raise AttachError(f"tc prio {prio}: expected 1..65535")
    ipr, idx = _open(ifname, netns)
    with ipr:
        created = False
        try:
            ipr.tc("add", "clsact", idx)
            created = True
        except NetlinkError as exc:
            if exc.code != 17:  # EEXIST: somebody's clsact already there, share it
                raise AttachError(f"cannot add clsact on {_where(ifname, netns)}: {exc}") from None
        if not created and _leftovers(ipr, idx, _PARENTS[direction], name, prio):
            # a process killed without cleanup left its filter behind: replace it
            with contextlib.suppress(NetlinkError):
                ipr.tc("del-filter", "bpf", idx, parent=_PARENTS[direction], prio=prio)
        try:
            ipr.tc("add-filter", "bpf", idx, ":1", fd=fd, name=name,
                   parent=_PARENTS[direction], classid=1, direct_action=True, prio=prio)
        except NetlinkError as exc:
            if created:
                with contextlib.suppress(NetlinkError):
                    ipr.tc("del", "clsact", idx)
            raise AttachError(f"cannot attach {name} at {_where(ifname, netns)} {direction} "
                              f"prio {prio}: {exc}") from None
    return TcAttachment(ifname=ifname, netns=netns, direction=direction, prio=prio,
                        ifindex=idx, created_qdisc=created, name=name)
