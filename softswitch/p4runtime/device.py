"""The device a P4Runtime server drives: the contract, and an in-process implementation.

Why a contract: the server knows no ports, queues or threads. A switch process
(interfaces, traffic manager, CPU port) implements `Device` and hosts the server;
tests and port-less users take `LocalDevice`, which runs each packet synchronously
through `Switch.process`. Both share these rules, taken from BMv2 simple_switch:

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
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from p4.config.v1 import p4info_pb2 as P4I

from softswitch.api import Switch
from softswitch.p4runtime.controller_header import ControllerHeader, controller_headers
from softswitch.p4runtime.errors import DeviceError
from softswitch.v1model.ports import DEFAULT_CPU_PORT, DROP_PORT


@dataclass(slots=True, kw_only=True)
class Pipeline:
    """A program installed on a device: the switch, its P4Info, the config bytes as sent."""

    switch: Switch
    p4info: P4I.P4Info
    device_config: bytes = b""
    cookie: int = 0
    packet_in: ControllerHeader | None = None
    packet_out: ControllerHeader | None = None

    @classmethod
    def create(cls, switch: Switch, p4info: P4I.P4Info, *, device_config: bytes = b"",
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


def drain_digests(switch: Switch) -> list[tuple[str, list[tuple[Any, ...]]]]:
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


class LocalDevice:
    """A device with no interfaces: packets go in through `inject` and come back as a list.

    Frames a PacketOut sends to ports other than the CPU port are kept in
    `transmitted` (bounded) so tests can look at them.
    """

    def __init__(self, *, device_id: int = 1, cpu_port: int = DEFAULT_CPU_PORT,
                 pipeline: Pipeline | None = None, keep_transmitted: int = 1024) -> None:
        if not 0 < cpu_port < DROP_PORT:
            raise DeviceError(f"LocalDevice: cpu_port {cpu_port} outside 1..{DROP_PORT - 1}")
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.lock = threading.RLock()
        self._pipeline = pipeline
        self._listeners = ListenerSet()
        self.transmitted: deque[tuple[int, bytes]] = deque(maxlen=keep_transmitted)

    @property
    def pipeline(self) -> Pipeline | None:
        return self._pipeline

    def set_pipeline(self, pipeline: Pipeline, *, reconcile: bool = False) -> None:
        from softswitch.p4runtime.reconcile import carry_state
        with self.lock:
            if reconcile and self._pipeline is not None:
                carry_state(self._pipeline.switch, pipeline.switch)
            self._pipeline = pipeline

    def add_listener(self, listener: DeviceListener) -> None:
        self._listeners.add(listener)

    def remove_listener(self, listener: DeviceListener) -> None:
        self._listeners.remove(listener)

    def inject(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """Process one frame arriving on `port`; returns frames sent to non-CPU ports."""
        with self.lock:
            pipe = self._pipeline
            if pipe is None:
                raise DeviceError("LocalDevice: no pipeline installed; packets cannot be processed")
            outs = pipe.switch.process(port, bytes(data))
            digests = drain_digests(pipe.switch)
        return self._deliver(pipe, outs, digests)

    def packet_out(self, payload: bytes, metadata: Mapping[str, int]) -> None:
        with self.lock:
            pipe = self._pipeline
            if pipe is None:
                raise DeviceError("LocalDevice: no pipeline installed; packet-out refused")
            frame = build_packet_out(pipe, payload, metadata)
            outs = pipe.switch.process(self.cpu_port, frame)
            digests = drain_digests(pipe.switch)
        self.transmitted.extend(self._deliver(pipe, outs, digests))

    def _deliver(self, pipe: Pipeline, outs: list[tuple[int, bytes]],
                 digests: list[tuple[str, list[tuple[Any, ...]]]]) -> list[tuple[int, bytes]]:
        wire = []
        for port, frame in outs:
            if port == self.cpu_port:
                try:
                    pkt = split_packet_in(pipe, frame)
                except DeviceError:
                    continue  # shorter than the packet_in header: BMv2 drops it too
                self._listeners.packet_in(pkt)
            else:
                wire.append((port, frame))
        for name, values in digests:
            self._listeners.digest(name, values)
        return wire
