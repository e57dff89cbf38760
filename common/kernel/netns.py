"""Network namespaces and veth links for tests, benchmarks and light test beds.

Why this exists: almost every part of the project is tested with real packets between
real hosts, and a host here is a Linux network namespace joined to others by veth pairs.
Each test needs names nobody else uses, addresses it can count on, processes started
inside a namespace, sockets opened inside one from the test process itself, and a
teardown that runs even when the test fails.  This module gives exactly that and nothing
more; Mininet is used where a full test bed is wanted.

Typical use::

    with two_hosts("tx") as (h1, h2):
        h2.popen(["python", "-m", "traffic", "p2p", "--rank", "1", ...])
        with h1.enter():                      # sockets made here live in h1
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        h1.run(["ping", "-c", "1", h2.ip])

Everything created is removed on exit of the ``with`` block (namespaces, veths, and the
processes started through :meth:`Namespace.popen`, ended by PID).
"""
from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import secrets
import signal
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from pyroute2 import IPRoute, NetNS, config, netns
from pyroute2.netlink.exceptions import NetlinkError

from common.kernel.setns import in_netns

__all__ = [
    "Interface",
    "Namespace",
    "NetnsError",
    "two_hosts",
    "unique_name",
    "veth_pair",
]

IFNAMSIZ = 15  # usable characters of a Linux interface name

# pyroute2 makes and enters namespaces in a forked copy of this process.  In its default
# "fork" mode a copy whose work raises past its handler (or whose reply fails because the
# parent gave up waiting) returns into the caller's frames: it runs the test's or the
# tool's ``finally`` blocks (closing the namespaces it shares with its parent) and ends
# with ``os.kill(0, SIGTERM)`` (its own pid is 0), which signals the whole process group.
# In "mp" mode the copy is a multiprocessing process, which always ends with ``_exit``.
config.child_process_mode = "mp"


class NetnsError(RuntimeError):
    """A namespace or link operation failed; the message names the object."""


def unique_name(prefix: str, max_len: int = IFNAMSIZ) -> str:
    """Return ``prefix`` plus a random suffix, short enough for an interface name.

    The random part makes parallel test runs (and leftovers of a crashed run) collide
    with probability ~1e-7 rather than always.
    """
    suffix = secrets.token_hex(3)
    if len(prefix) + len(suffix) > max_len:
        raise NetnsError(
            f"name prefix {prefix!r} is too long: prefix + 6 random characters must fit "
            f"in {max_len} characters"
        )
    return prefix + suffix


@dataclass(slots=True, kw_only=True)
class Interface:
    """One end of a link: where it lives and how it is addressed."""

    ns: Namespace | None  # None: the root namespace
    ifname: str
    ip: str | None = None
    prefixlen: int = 24
    mac: str = ""

    @property
    def ifindex(self) -> int:
        with _iproute(self.ns) as ipr:
            found = ipr.link_lookup(ifname=self.ifname)
        if not found:
            raise NetnsError(f"interface {self.ifname} not found in {_where(self.ns)}")
        return found[0]


@dataclass(slots=True, kw_only=True, eq=False)
class Namespace:
    """A network namespace we created and own; closing it ends what it started.

    ``ip``/``ifname``/``mac`` describe the namespace's main interface when it is used as a
    host (set by :func:`two_hosts` / :func:`veth_pair`); they are empty otherwise.
    """

    name: str
    ifname: str = ""
    ip: str = ""
    mac: str = ""
    interfaces: list[Interface] = field(default_factory=list)
    _procs: list[subprocess.Popen] = field(default_factory=list)
    _closed: bool = False
    _owner: int = field(default_factory=os.getpid)
    """The process that created it: a forked copy of that process must not end its
    processes or delete the namespace (pyroute2's fork-mode helpers were such copies
    and ran the creator's ``finally`` blocks; the module now runs them in mp mode)."""

    @classmethod
    def create(cls, prefix: str) -> Namespace:
        """Create a namespace named ``prefix`` + random suffix, with loopback up."""
        name = unique_name(prefix, max_len=32)
        try:
            netns.create(name)
        except Exception as exc:  # pyroute2 raises several kinds
            raise NetnsError(f"cannot create network namespace {name}: {exc}") from exc
        ns = cls(name=name)
        try:
            with NetNS(name, flags=0) as ipr:
                ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        except Exception:
            ns.close()
            raise
        return ns

    # -- processes -------------------------------------------------------------------
    def argv(self, argv: Sequence[str]) -> list[str]:
        """The command line that runs ``argv`` inside this namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def run(
        self, argv: Sequence[str], *, check: bool = True, timeout: float = 60.0, **kw
    ) -> subprocess.CompletedProcess:
        """Run a command inside the namespace and wait for it (output captured as text)."""
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        res = subprocess.run(self.argv(argv), check=False, timeout=timeout, **kw)
        if check and res.returncode != 0:
            raise NetnsError(
                f"in namespace {self.name}: {' '.join(argv)} exited {res.returncode}: "
                f"{(res.stderr or '').strip()}"
            )
        return res

    def popen(self, argv: Sequence[str], **kw) -> subprocess.Popen:
        """Start a command inside the namespace; it is ended (by PID) when we close."""
        proc = subprocess.Popen(self.argv(argv), **kw)
        self._procs.append(proc)
        return proc

    def enter(self) -> contextlib.AbstractContextManager[None]:
        """Switch the calling thread into this namespace for the block.

        Sockets created inside the block stay in this namespace after it ends, which lets
        one test process talk from several hosts at once.
        """
        return in_netns(self.name)

    def iproute(self) -> NetNS:
        """A pyroute2 handle on this namespace (use as a context manager); an error if
        its name is gone (pyroute2 would otherwise make a new, empty one by that name)."""
        try:
            return NetNS(self.name, flags=0)
        except FileNotFoundError:
            raise NetnsError(f"namespace {self.name} is gone (no /var/run/netns/{self.name})"
                             ) from None

    # -- teardown --------------------------------------------------------------------
    def stop_processes(self, timeout: float = 3.0) -> None:
        """End every process started with :meth:`popen`: SIGTERM, then SIGKILL."""
        for proc in self._procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(timeout=timeout)
        self._procs.clear()

    def close(self) -> None:
        """Stop our processes and delete the namespace (its veth ends go with it);
        nothing in a forked copy of the process that created it."""
        if self._closed or os.getpid() != self._owner:
            return
        self._closed = True
        try:
            self.stop_processes()
        finally:
            with contextlib.suppress(Exception):
                netns.remove(self.name)

    def __enter__(self) -> Namespace:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _where(ns: Namespace | None) -> str:
    return f"namespace {ns.name}" if ns else "the root namespace"


def _iproute(ns: Namespace | None):
    return ns.iproute() if ns else IPRoute()


def _configure_end(end: Interface, mtu: int) -> None:
    with _iproute(end.ns) as ipr:
        found = ipr.link_lookup(ifname=end.ifname)
        if not found:
            raise NetnsError(f"interface {end.ifname} missing in {_where(end.ns)}")
        idx = found[0]
        ipr.link("set", index=idx, mtu=mtu)
        if end.ip:
            ipr.addr("add", index=idx, address=end.ip, prefixlen=end.prefixlen)
        ipr.link("set", index=idx, state="up")
        end.mac = ipr.get_links(idx)[0].get_attr("IFLA_ADDRESS")


def veth_pair(
    a: Namespace | None,
    b: Namespace | None,
    *,
    prefix: str,
    addr_a: str | None = None,
    addr_b: str | None = None,
    mtu: int = 1500,
) -> tuple[Interface, Interface]:
    """Join ``a`` and ``b`` (namespaces, or None for the root) with a new veth pair.

    ``addr_a``/``addr_b`` are "ip/prefixlen" strings or None.  The ends are named
    ``prefix`` + random + ``a``/``b``.  Ends in a namespace vanish with it; an end in
    the root namespace must be deleted by the caller (see :func:`delete_link`).
    """
    base = unique_name(prefix, max_len=IFNAMSIZ - 1)
    ends = []
    for ns, suffix, addr in ((a, "a", addr_a), (b, "b", addr_b)):
        ip, plen = None, 24
        if addr:
            iface = ipaddress.ip_interface(addr)
            ip, plen = str(iface.ip), iface.network.prefixlen
        ends.append(Interface(ns=ns, ifname=base + suffix, ip=ip, prefixlen=plen))
    end_a, end_b = ends
    try:
        with IPRoute() as ipr:
            peer: dict[str, object] = {"ifname": end_b.ifname}
            if b is not None:
                peer["net_ns_fd"] = b.name
            ipr.link("add", ifname=end_a.ifname, kind="veth", peer=peer)
            if a is not None:
                idx = ipr.link_lookup(ifname=end_a.ifname)[0]
                ipr.link("set", index=idx, net_ns_fd=a.name)
        _configure_end(end_a, mtu)
        _configure_end(end_b, mtu)
    except Exception as exc:
        for end in ends:
            with contextlib.suppress(Exception):
                delete_link(end)
        raise NetnsError(f"cannot create veth pair {end_a.ifname}/{end_b.ifname}: {exc}") from exc
    for end in ends:
        if end.ns is not None:
            end.ns.interfaces.append(end)
    return end_a, end_b


def delete_link(end: Interface) -> None:
    """Delete a link (both veth ends go); a missing link is not an error."""
    with _iproute(end.ns) as ipr:
        found = ipr.link_lookup(ifname=end.ifname)
        if found:
            try:
                ipr.link("del", index=found[0])
            except NetlinkError as exc:
                # the peer's namespace was just deleted and took this end with it
                if exc.code != errno.ENODEV:
                    raise


@contextlib.contextmanager
def two_hosts(
    prefix: str, *, subnet: str = "10.77.0.0/24", mtu: int = 1500
) -> Iterator[tuple[Namespace, Namespace]]:
    """Two namespaces joined by one veth pair, addressed .1 and .2 in ``subnet``.

    Each namespace's ``ip``, ``ifname`` and ``mac`` describe its end of the link.
    """
    net = ipaddress.ip_network(subnet)
    hosts = [net.network_address + 1, net.network_address + 2]
    h1 = Namespace.create(prefix)
    h2 = None
    try:
        h2 = Namespace.create(prefix)
        e1, e2 = veth_pair(
            h1, h2, prefix=prefix,
            addr_a=f"{hosts[0]}/{net.prefixlen}", addr_b=f"{hosts[1]}/{net.prefixlen}", mtu=mtu,
        )
        for host, end in ((h1, e1), (h2, e2)):
            host.ifname, host.ip, host.mac = end.ifname, end.ip or "", end.mac
        yield h1, h2
    finally:
        if h2 is not None:
            h2.close()
        h1.close()
