"""The namespace helpers every real-packet test relies on."""
import os
import socket
import subprocess
from pathlib import Path

import pytest

from common.kernel.netns import Namespace, NetnsError, two_hosts, unique_name, veth_pair

pytestmark = pytest.mark.root
ROOT = Path(__file__).resolve().parents[2]


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                         check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def test_two_hosts_ping_and_cleanup():
    with two_hosts("tnsa") as (h1, h2):
        assert h1.name in _namespaces() and h2.name in _namespaces()
        h1.run(["ping", "-c", "1", "-W", "2", h2.ip])
        names = (h1.name, h2.name)
    assert not set(names) & _namespaces()


def test_socket_made_inside_namespace_stays_there():
    with two_hosts("tnsb") as (h1, h2):
        with h2.enter():
            rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            rx.bind((h2.ip, 0))
        with h1.enter():
            tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.settimeout(2)
        tx.sendto(b"hello", rx.getsockname())
        assert rx.recvfrom(100)[0] == b"hello"
        tx.close()
        rx.close()
    # back in the root namespace: the host address is not ours here
    with pytest.raises(OSError):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind((h2.ip, 0))
        finally:
            s.close()


def test_processes_are_ended_on_close():
    with Namespace.create("tnsc") as ns:
        proc = ns.popen(["sleep", "60"])
        pid = proc.pid
    assert proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_failure_inside_block_still_cleans_up():
    created = []
    with pytest.raises(RuntimeError), two_hosts("tnsd") as (h1, h2):
        created += [h1.name, h2.name]
        raise RuntimeError("boom")
    assert not set(created) & _namespaces()


def test_errors_name_the_object():
    with pytest.raises(NetnsError, match="too long"):
        unique_name("x" * 14)
    with Namespace.create("tnse") as ns:  # noqa: SIM117 (the match names ns)
        with pytest.raises(NetnsError, match=f"in namespace {ns.name}: false exited 1"):
            ns.run(["false"])


def test_veth_to_root_namespace():
    with Namespace.create("tnsf") as ns:
        root_end, _ns_end = veth_pair(None, ns, prefix="tnsf", addr_a="10.78.0.1/30",
                                     addr_b="10.78.0.2/30")
        try:
            ns.run(["ping", "-c", "1", "-W", "2", "10.78.0.1"])
        finally:
            from common.kernel.netns import delete_link
            delete_link(root_end)


def test_a_forked_copy_of_the_creator_deletes_nothing():
    """A forked copy of the test process that unwinds through a ``with`` (pyroute2 forks
    one per namespace socket) leaves the creator's namespace and processes alone."""
    with Namespace.create("tnsg") as ns:
        sleeper = ns.popen(["sleep", "30"])
        pid = os.fork()
        if pid == 0:  # the copy: closing must be a no-op here
            try:
                ns.close()
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert ns.name in _namespaces() and sleeper.poll() is None
        ns.run(["true"])
    assert ns.name not in _namespaces() and sleeper.poll() is not None


def test_a_namespace_whose_name_is_gone_is_an_error_not_a_new_namespace():
    ns = Namespace.create("tnsh")
    try:
        subprocess.run(["ip", "netns", "del", ns.name], check=True)
        with pytest.raises(NetnsError, match=f"namespace {ns.name} is gone"):
            ns.iproute()
        assert ns.name not in _namespaces()   # pyroute2 alone would have made it anew
    finally:
        ns.close()


_FAILING_CHILD = """
import contextlib, os, sys
import common.kernel.netns  # noqa: F401  (sets pyroute2's child process mode)
from pyroute2.process import ChildProcess

def target():
    raise KeyboardInterrupt   # escapes the child's `except Exception`

me = os.getpid()
try:
    with ChildProcess(target=target, args=[]) as proc:
        with contextlib.suppress(Exception):
            proc.communicate(timeout=5)
finally:
    if os.getpid() != me:
        open(sys.argv[1], "w").write("the copy ran its caller's code")
        os._exit(0)
print("ok")
"""


def test_a_failing_pyroute2_child_never_runs_its_callers_code(tmp_path):
    """pyroute2's forked helper that fails ends there: it neither returns into the
    caller's frames (their ``finally`` blocks close namespaces) nor signals the process
    group (in fork mode its ``stop`` sends SIGTERM to pid 0).  Run in a session of its
    own, so a regression ends that session only."""
    import sys

    marker = tmp_path / "unwound"
    r = subprocess.run([sys.executable, "-c", _FAILING_CHILD, str(marker)], cwd=ROOT, check=False,
                       capture_output=True, text=True, timeout=60, start_new_session=True)
    assert not marker.exists(), marker.read_text()
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-800:])


_RAISING_SIGTERM = """
import os, signal, sys
from common.kernel.netns import Namespace

def raising(*_):
    raise KeyboardInterrupt   # what an in-process CLI's handler does

signal.signal(signal.SIGTERM, raising)
me = os.getpid()
for i in range(20):
    try:
        with Namespace.create("tnsi") as ns, ns.iproute() as ipr:
            ipr.link_lookup(ifname="lo")
    finally:
        if os.getpid() != me:
            open(sys.argv[1], "a").write(f"copy at {i}\\n")
            os._exit(0)
print("ok")
"""


def test_namespace_helpers_never_run_the_callers_code_under_a_raising_sigterm(tmp_path):
    """The failure of stop 44's CI: with a SIGTERM handler that raises in the test
    process, pyroute2's fork-mode helpers (ended with SIGTERM) unwound through the
    caller's frames, 35 of 60 times in a loop like this one, and closed its namespaces."""
    import sys

    marker = tmp_path / "copies"
    r = subprocess.run([sys.executable, "-c", _RAISING_SIGTERM, str(marker)], cwd=ROOT,
                       check=False, capture_output=True, text=True, timeout=120,
                       start_new_session=True)
    assert not marker.exists(), marker.read_text()
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-800:])
