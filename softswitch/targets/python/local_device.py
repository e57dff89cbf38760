"""The in-process P4Runtime device of the Python target: no interfaces, packets go in
through `inject` and come back as a list (tests, the controller's dry runs).
"""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from softswitch.p4runtime.device import (
    DeviceListener,
    ListenerSet,
    Pipeline,
    build_packet_out,
    drain_digests,
    split_packet_in,
)
from softswitch.p4runtime.errors import DeviceError
from softswitch.v1model.ports import DEFAULT_CPU_PORT, DROP_PORT


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

    def build_switch(self, path: Path, *, name: str) -> Any:
        from softswitch.targets.python.switch import Switch
        return Switch.from_file(path, name=name)

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
