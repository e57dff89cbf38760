"""The XDP program on the switch ports: BPF links, the attach mode, veth peers.

Why BPF links (``BPF_LINK_CREATE``, not netlink's ``IFLA_XDP``): a link belongs to its
file descriptor, so the kernel detaches the program when the switch process ends,
also on SIGKILL or a crash (nothing is left on the ports); a new pipeline replaces the
program on every port atomically (``BPF_LINK_UPDATE``).

Why the mode needs care on veths (measured on Linux 6.18):

* ``XDP_REDIRECT`` in native (driver) mode hands the frame to the egress device's
  ``ndo_xdp_xmit``; a veth delivers it into its peer's NAPI ring, which exists only
  while the peer runs an XDP program or has GRO on. Otherwise the kernel drops the
  frame without counting it anywhere a user looks (0 of 50 frames arrived; with GRO
  on at the peer, 50 of 50).
* a frame a host sends into a veth with checksum offload on (the default) carries a
  partial TCP/UDP checksum that only its socket buffer knows how to finish; native
  XDP turns it into a bare frame, so the receiver sees a wrong checksum and drops it
  (5 of 5 UDP datagrams counted in UdpInCsumErrors; with ``tx`` off at the sender, 0).

Generic (skb) mode runs the same program on the socket buffer and sends redirected
frames through the device's transmit, which works with any peer at a lower rate.
``choose_mode`` picks native when every veth port's peer has NAPI and checksums its
frames itself (configuring a peer in the switch's own namespace, which the switch
owns: GRO on, tx checksum offload off, both restored at close), else generic with a
warning that names the ports and the fix; ``--xdp-mode native`` refuses instead,
``generic`` asks for generic. Ports that are not veths (NICs) go native when the
driver can, else generic.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import fcntl
import logging
import os
import socket
import struct
from collections.abc import Iterator

from softswitch.backends.ebpf.errors import EbpfKernelError
from softswitch.backends.ebpf.kernel import _NR_BPF, _libc

LOG = logging.getLogger("softswitch.ebpf")
XDP_MODES = ("auto", "native", "generic")
BPF_LINK_CREATE, BPF_LINK_UPDATE, BPF_LINK_DETACH = 28, 29, 34
BPF_XDP = 37                                   # enum bpf_attach_type
XDP_FLAGS = {"generic": 1 << 1, "native": 1 << 2}   # XDP_FLAGS_SKB_MODE, XDP_FLAGS_DRV_MODE
SIOCETHTOOL = 0x8946
ETHTOOL_GET = {"gro": 0x2B, "tx": 0x16}       # ETHTOOL_GGRO, ETHTOOL_GTXCSUM
ETHTOOL_SET = {"gro": 0x2C, "tx": 0x17}       # ETHTOOL_SGRO, ETHTOOL_STXCSUM
NATIVE_PEER = {"gro": 1, "tx": 0}             # what a veth peer needs for native XDP


class _LinkCreate(ctypes.Structure):
    _fields_ = [("prog_fd", ctypes.c_uint32), ("target_ifindex", ctypes.c_uint32),
                ("attach_type", ctypes.c_uint32), ("flags", ctypes.c_uint32)]


class _LinkUpdate(ctypes.Structure):
    _fields_ = [("link_fd", ctypes.c_uint32), ("new_prog_fd", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("old_prog_fd", ctypes.c_uint32)]


def _bpf(cmd: int, attr: ctypes.Structure) -> int:
    rc = int(_libc.syscall(_NR_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr)))
    if rc < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return rc


@contextlib.contextmanager
def _in(netns: str | None) -> Iterator[None]:
    from common.kernel.errors import AttachError
    from common.kernel.setns import in_netns
    try:
        with in_netns(netns):
            yield
    except AttachError as exc:
        raise EbpfKernelError(str(exc)) from None


@dataclasses.dataclass(slots=True, kw_only=True)
class XdpLink:
    """The program on one port through a BPF link (closing the fd detaches it)."""

    ifname: str
    ifindex: int
    mode: str
    fd: int

    def update(self, prog_fd: int) -> None:
        """Run `prog_fd` on this port from now on (the kernel swaps it atomically)."""
        try:
            _bpf(BPF_LINK_UPDATE, _LinkUpdate(link_fd=self.fd, new_prog_fd=prog_fd))
        except OSError as exc:
            raise EbpfKernelError(f"{self.ifname}: replacing the XDP program: {exc.strerror}") from None

    def detach(self) -> None:
        """Detach now (even if a child process inherited the fd) and close; twice is fine."""
        if self.fd < 0:
            return
        with contextlib.suppress(OSError):
            _bpf(BPF_LINK_DETACH, _LinkUpdate(link_fd=self.fd))
        os.close(self.fd)
        self.fd = -1


def attach_xdp(prog_fd: int, ifname: str, mode: str, netns: str | None = None) -> XdpLink:
    """Attach XDP program `prog_fd` to `ifname` (in `netns`) in `mode` (native/generic)."""
    with _in(netns):
        try:
            ifindex = socket.if_nametoindex(ifname)
        except OSError:
            raise EbpfKernelError(f"interface {ifname} not found"
                                  + (f" in namespace {netns}" if netns else "")) from None
        try:
            fd = _bpf(BPF_LINK_CREATE, _LinkCreate(prog_fd=prog_fd, target_ifindex=ifindex,
                                                   attach_type=BPF_XDP, flags=XDP_FLAGS[mode]))
        except OSError as exc:
            hint = (" (another XDP program is attached: `ip link set dev IF xdp off` removes a "
                    "stale one)" if exc.errno == 16 else "")
            raise EbpfKernelError(f"{ifname}: attaching the XDP program in {mode} mode: "
                                  f"{exc.strerror}{hint}") from None
    return XdpLink(ifname=ifname, ifindex=ifindex, mode=mode, fd=fd)


# ------------------------------------------------------------- veth peers
def _feature(ifname: str, name: str, value: int | None = None) -> bool:
    """Feature `name` (gro, tx) of `ifname` in the calling thread's namespace (set it
    when `value` is given)."""
    cmd = ETHTOOL_GET[name] if value is None else ETHTOOL_SET[name]
    edata = ctypes.create_string_buffer(struct.pack("II", cmd, value or 0))
    ifr = struct.pack("16sP", ifname.encode(), ctypes.addressof(edata))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifr)
    return bool(struct.unpack("II", edata.raw[:8])[1]) if value is None else bool(value)


@dataclasses.dataclass(slots=True)
class Peer:
    """A veth port's other end: where it is and whether it can take XDP frames."""

    port_ifname: str
    ifname: str
    netns: str | None        # a path, or None: the switch's own namespace
    lacks: list[str]         # features to change for native XDP ("gro", "tx")


def _peer_of(ifname: str, netns: str | None) -> Peer | None:
    """The veth peer of `ifname` (None when it is not a veth; lacking "unknown" when
    its namespace or the peer cannot be found: then native mode is not assumed)."""
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkError
    with _in(netns), IPRoute() as ipr:
        found = ipr.link_lookup(ifname=ifname)
        if not found:
            return None
        link = ipr.get_links(found[0])[0]
        info = link.get_attr("IFLA_LINKINFO")
        if info is None or info.get_attr("IFLA_INFO_KIND") != "veth":
            return None
        peer_index = link.get_attr("IFLA_LINK")
        nsid = link.get_attr("IFLA_LINK_NETNSID")
        path = None
        if nsid is not None:
            path = next((ns.get_attr("NSINFO_PATH") for ns in ipr.get_netns_info(list_proc=True)
                         if ns.get("netnsid") == nsid), None)
    unknown = Peer(port_ifname=ifname, ifname=f"ifindex {peer_index}", netns=f"namespace id {nsid}",
                   lacks=["unknown"])
    if nsid is not None and path is None:
        return unknown                       # a namespace the switch cannot open
    with _in(path if nsid is not None else netns), IPRoute() as ipr:
        try:
            links = ipr.get_links(peer_index) if peer_index else []
        except NetlinkError:
            links = []
        if not links:
            return unknown
        peer = links[0]
        pname = str(peer.get_attr("IFLA_IFNAME"))
        xdp = peer.get_attr("IFLA_XDP")
        has_xdp = bool(xdp is not None and xdp.get_attr("IFLA_XDP_ATTACHED"))
        lacks = []
        for name, want in NATIVE_PEER.items():
            if name == "gro" and has_xdp:
                continue                     # an XDP program gives the peer its NAPI too
            try:
                if _feature(pname, name) != bool(want):
                    lacks.append(name)
            except OSError:
                lacks.append(name)
    return Peer(port_ifname=ifname, ifname=pname, netns=path, lacks=lacks)


_WHY = {"gro": "neither GRO nor an XDP program (native XDP_REDIRECTs into it would be dropped)",
        "tx": "tx checksum offload on (its TCP/UDP frames would arrive with bad checksums)",
        "unknown": "settings the switch cannot read (its namespace could not be opened)"}


class XdpPorts:
    """The XDP links of one switch process and the peers it configured; `close` undoes all."""

    def __init__(self, netns: str | None = None) -> None:
        self.netns = netns
        self.links: dict[str, XdpLink] = {}
        self.changed: list[tuple[str, str]] = []   # (peer, feature) we changed in our namespace
        self.mode = ""

    def choose_mode(self, ifnames: list[str], requested: str = "auto") -> str:
        """native or generic for every port (see the module's docstring)."""
        if requested not in XDP_MODES:
            raise EbpfKernelError(f"--xdp-mode {requested!r}: expected one of {', '.join(XDP_MODES)}")
        if requested == "generic":
            return "generic"
        lacking: list[Peer] = []
        for ifname in ifnames:
            peer = _peer_of(ifname, self.netns)
            if peer is None or not peer.lacks:
                continue
            if peer.netns is None and "unknown" not in peer.lacks:
                # the peer is in the switch's namespace: the switch configures it
                with _in(self.netns):
                    for name in peer.lacks:
                        _feature(peer.ifname, name, NATIVE_PEER[name])
                        self.changed.append((peer.ifname, name))
                LOG.info("%s: veth peer %s set to %s for native XDP", ifname, peer.ifname,
                         " ".join(f"{n} {'on' if NATIVE_PEER[n] else 'off'}" for n in peer.lacks))
                continue
            lacking.append(peer)
        if not lacking:
            return "native"
        why = "; ".join(f"port {p.port_ifname}: veth peer {p.ifname} in {p.netns} has "
                        + " and ".join(_WHY[n] for n in p.lacks) for p in lacking)
        fix = "ethtool -K PEER gro on tx off in each peer's namespace"
        if requested == "native":
            raise EbpfKernelError(f"--xdp-mode native: {why}; {fix}, or use --xdp-mode generic")
        LOG.warning("XDP in generic (skb) mode on every port: %s; for native mode, %s", why, fix)
        return "generic"

    def attach(self, prog_fd: int, ifnames: list[str], requested: str = "auto") -> None:
        """The program on every port, or on the ports it is not on yet; a new program
        replaces the old one atomically on ports already attached."""
        if not self.mode:
            self.mode = self.choose_mode(ifnames, requested)
        for ifname in ifnames:
            link = self.links.get(ifname)
            if link is not None:
                link.update(prog_fd)
                continue
            try:
                self.links[ifname] = attach_xdp(prog_fd, ifname, self.mode, self.netns)
            except EbpfKernelError as exc:
                if self.mode != "native" or requested == "native" or self.links:
                    raise
                # the driver has no native XDP: every port in generic mode
                LOG.warning("%s; XDP in generic (skb) mode on every port", exc)
                self.mode = "generic"
                self.links[ifname] = attach_xdp(prog_fd, ifname, self.mode, self.netns)

    def ifindexes(self, ifnames: list[str]) -> dict[str, int]:
        """Each port's ifindex in the ports' namespace."""
        out = {}
        with _in(self.netns):
            for ifname in ifnames:
                try:
                    out[ifname] = socket.if_nametoindex(ifname)
                except OSError:
                    raise EbpfKernelError(f"interface {ifname} not found"
                                          + (f" in namespace {self.netns}" if self.netns else "")) from None
        return out

    def close(self) -> None:
        for link in self.links.values():
            link.detach()
        self.links = {}
        for ifname, name in self.changed:
            with contextlib.suppress(OSError, EbpfKernelError), _in(self.netns):
                _feature(ifname, name, 1 - NATIVE_PEER[name])
        self.changed = []
