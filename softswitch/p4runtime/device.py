"""The device a P4Runtime server drives: the contract and the rules every device shares.

Why a contract: the server knows no ports, queues, threads or targets. Each target's
switch process (``softswitch.targets.*.daemon``) implements `Device` and hosts the
server, and compiles the programs it is sent (`Device.build_switch`); tests and
port-less users take ``softswitch.targets.python.local_device.LocalDevice``, which
runs each packet synchronously through `Switch.process`. All share these rules, taken
from BMv2 simple_switch:

* PacketOut: the @controller_header("packet_out") header, built from the metadata,
  is prepended to the payload and the frame enters ingress on the CPU port.
* PacketIn: a frame egressing on the CPU port has its @controller_header("packet_in")
  header split off into metadata; the rest is the payload.
* Digests: what the data plane pushed with ``digest()`` is drained after each packet
  and handed to the listeners as (digest name, list of field tuples).
* `lock` serialises control-plane reads/writes with packet processing: the data path
  holds it per packet, the server per request.

Listeners are called from the data-path thread and must not block (queue and return).
"""
from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from p4.config.v1 import p4info_pb2 as P4I

from softswitch.p4runtime.controller_header import ControllerHeader, controller_headers
from softswitch.p4runtime.errors import DeviceError


@dataclass(slots=True, kw_only=True)
class Pipeline:
    """A program installed on a device: the switch, its P4Info, the config bytes as sent."""

    switch: Any          # a target's switch (``softswitch.targets``): runtime, program, process
    p4info: P4I.P4Info
    device_config: bytes = b""
    cookie: int = 0
    packet_in: ControllerHeader | None = None
    packet_out: ControllerHeader | None = None

    @classmethod
    def create(cls, switch: Any, p4info: P4I.P4Info, *, device_config: bytes = b"",
               cookie: int = 0) -> Pipeline:
        headers = controller_headers(p4info)
        return cls(switch=switch, p4info=p4info, device_config=device_config, cookie=cookie,
                   packet_in=headers.get("packet_in"), packet_out=headers.get("packet_out"))


@dataclass(slots=True, frozen=True, kw_only=True)
class PacketIn:
    """A frame sent to the controller: payload after the packet_in header, its fields by name."""

    payload: bytes
    metadata: dict[str, int] = field(default_factory=dict)


class DeviceListener(Protocol):
    """Receives what the data plane sends to the controller. Must not block."""

    def on_packet_in(self, packet: PacketIn) -> None: ...

    def on_digest(self, name: str, values: list[tuple[Any, ...]]) -> None: ...


@runtime_checkable
class Device(Protocol):
    """What the P4Runtime server needs from a switch."""

    device_id: int
    cpu_port: int
    lock: threading.RLock

    @property
    def pipeline(self) -> Pipeline | None: ...

    def build_switch(self, path: Path, *, name: str) -> Any:
        """Compile the program at `path` for this device's target (SetForwardingPipelineConfig
        hands the result to `set_pipeline`); raises P4Error or SoftswitchError."""

    def set_pipeline(self, pipeline: Pipeline, *, reconcile: bool = False) -> None:
        """Atomically replace the running pipeline. With `reconcile`, carry the forwarding
        state (entries, counters, registers, meters, PRE) over, or raise DeviceError and
        keep the old pipeline."""

    def packet_out(self, payload: bytes, metadata: Mapping[str, int]) -> None:
        """Inject `payload` at the CPU port behind the packet_out header built from `metadata`."""

    def add_listener(self, listener: DeviceListener) -> None: ...

    def remove_listener(self, listener: DeviceListener) -> None: ...


def split_packet_in(pipeline: Pipeline, frame: bytes) -> PacketIn:
    """A frame egressing on the CPU port as a PacketIn (whole frame if no packet_in header)."""
    if pipeline.packet_in is None:
        return PacketIn(payload=frame)
    meta, payload = pipeline.packet_in.decode(frame)
    return PacketIn(payload=payload, metadata=meta)


def build_packet_out(pipeline: Pipeline, payload: bytes, metadata: Mapping[str, int]) -> bytes:
    """The frame entering ingress on the CPU port for a PacketOut."""
    if pipeline.packet_out is None:
        if metadata:
            raise DeviceError(f"packet-out metadata {dict(metadata)} given, but the program has no "
                              f"@controller_header(\"packet_out\") header")
        return bytes(payload)
    return pipeline.packet_out.encode(metadata) + bytes(payload)


def drain_digests(switch: Any) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """Pop every digest queue of `switch`; (name, values) for the non-empty ones."""
    out = []
    for name, q in switch.program.digests.items():
        if q.queue:
            out.append((name, q.pop_all()))
    return out


class ListenerSet:
    """Listeners of a device; notification never raises into the data path."""

    def __init__(self) -> None:
        self._listeners: list[DeviceListener] = []
        self._mu = threading.Lock()

    def add(self, listener: DeviceListener) -> None:
        with self._mu:
            self._listeners.append(listener)

    def remove(self, listener: DeviceListener) -> None:
        with self._mu:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def packet_in(self, packet: PacketIn) -> None:
        with self._mu:
            targets = list(self._listeners)
        for li in targets:
            li.on_packet_in(packet)

    def digest(self, name: str, values: list[tuple[Any, ...]]) -> None:
        with self._mu:
            targets = list(self._listeners)
        for li in targets:
            li.on_digest(name, values)
