"""P4Runtime for softswitch: the device contract and a p4.v1.P4Runtime gRPC server.

    device = LocalDevice(device_id=1)     # softswitch.targets.python.local_device
    handle = serve(device, "127.0.0.1:9559")
    ...
    handle.stop()

Layers: `device` (what a switch offers: pipeline swap, packet-out, packet-in and
digest listeners, a lock) <- `service` (P4Runtime semantics, no sockets) <- `server`
(grpcio, TLS).
"""
from __future__ import annotations

from softswitch.p4runtime.device import (
    Device,
    DeviceListener,
    PacketIn,
    Pipeline,
)
from softswitch.p4runtime.errors import DeviceError, P4RuntimeError
from softswitch.v1model.ports import DEFAULT_CPU_PORT

__all__ = ["DEFAULT_CPU_PORT", "Device", "DeviceError", "DeviceListener",
           "P4RuntimeError", "P4RuntimeService", "PacketIn", "Pipeline", "ServerHandle", "TlsConfig",
           "serve"]


def __getattr__(name: str) -> object:
    # the gRPC server is imported on first use, so the device contract stays light
    if name in ("serve", "ServerHandle", "TlsConfig"):
        from softswitch.p4runtime import server
        return getattr(server, name)
    if name == "P4RuntimeService":
        from softswitch.p4runtime.service import P4RuntimeService
        return P4RuntimeService
    raise AttributeError(name)
