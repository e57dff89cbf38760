"""Fixtures for the P4Runtime server tests: a real gRPC server on 127.0.0.1 (free port)
with a LocalDevice, the test program and its P4Info, and connected clients."""
from __future__ import annotations

import pytest
from p4.config.v1 import p4info_pb2 as P4I
from p4rt_helpers import DEVICE_ID, PROGRAM, Client, Ids

from softswitch.p4info import build_p4info
from softswitch.p4runtime import serve
from softswitch.targets.python.local_device import LocalDevice
from softswitch.targets.python.switch import Switch


@pytest.fixture(scope="session")
def program_source() -> bytes:
    return PROGRAM.read_bytes()


@pytest.fixture(scope="session")
def p4info() -> P4I.P4Info:
    return build_p4info(Switch.from_file(PROGRAM).program.checked)


@pytest.fixture(scope="session")
def ids(p4info: P4I.P4Info) -> Ids:
    return Ids(p4info)


@pytest.fixture
def device() -> LocalDevice:
    return LocalDevice(device_id=DEVICE_ID)


@pytest.fixture
def server(device: LocalDevice):  # type: ignore[no-untyped-def]
    handle = serve(device, "127.0.0.1:0")
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def make_client(server):  # type: ignore[no-untyped-def]
    clients: list[Client] = []

    def make(**kw) -> Client:  # type: ignore[no-untyped-def]
        c = Client(server.address, **kw)
        clients.append(c)
        return c

    try:
        yield make
    finally:
        for c in clients:
            c.close()


@pytest.fixture
def client(make_client, p4info, program_source) -> Client:  # type: ignore[no-untyped-def]
    """The primary (election id 1) with the test program installed."""
    c = make_client(election_id=1)
    c.set_pipeline(p4info, program_source)
    return c
