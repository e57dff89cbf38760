"""What every target's switch process shares beyond ports and queues: the entries
file applied at start, and the P4Runtime server on a TCP or unix address (started from
the switch's options, stopped at close).

Each target's daemon (``softswitch.targets.python.daemon``,
``softswitch.targets.ebpf.daemon``) calls these; they know no target.
"""
from __future__ import annotations

import logging
from typing import Any

from softswitch.errors import SoftswitchError
from softswitch.p4runtime.device import Device
from softswitch.switchd.errors import ProgramError, SwitchdError
from softswitch.switchd.options import SwitchOptions

LOG = logging.getLogger("softswitch.switchd")


def apply_entries(sw: Any, path: str) -> None:
    """Apply an STF-syntax configuration file (tables, mirroring, multicast); packets and
    expectations are refused, since a running switch takes its packets from the wire."""
    from softswitch.stf import StfRunner, parse_stf
    try:
        with open(path, encoding="utf-8") as f:
            cmds = parse_stf(f.read(), path)
        bad = [c for c in cmds if c.verb in ("packet", "expect")]
        if bad:
            raise ProgramError(f"{path}:{bad[0].line}: error: an entries file holds configuration "
                               f"only, not {bad[0].verb}")
        StfRunner(sw).run(cmds, path)
    except OSError as exc:
        raise ProgramError(f"{path}: error: cannot read the entries: {exc.strerror}") from None
    except ProgramError:
        raise
    except SoftswitchError as exc:
        text = str(exc)
        raise ProgramError(f"error: {text}" if text.startswith(path) else f"{path}: error: {text}") from None


def serve_options(device: Device, opts: SwitchOptions) -> Any:
    """Start the P4Runtime server that ``--grpc-server-addr`` names (which must be set),
    with TLS when ``--tls-cert``/``--tls-key`` (and, for client certificates,
    ``--tls-ca``) are given; returns what `stop_server` stops."""
    if not opts.grpc_server_addr:
        raise SwitchdError("no --grpc-server-addr: no P4Runtime server to start")
    tls = None
    if opts.tls_cert:
        from softswitch.p4runtime.server import TlsConfig
        tls = TlsConfig.from_files(opts.tls_cert, opts.tls_key or "", opts.tls_ca)
    return start_grpc(device, opts.grpc_server_addr, tls)


def stop_server(server: Any) -> None:
    """Stop a server from `serve_options` (None: none runs).  A failure is logged, not
    raised: the daemon's close releases its other resources regardless."""
    if server is None:
        return
    try:
        server.stop(0.2)
    except Exception as exc:  # noqa: BLE001 - shutting down regardless
        LOG.warning("stopping the P4Runtime server: %s", exc)


def start_grpc(device: Device, address: str, tls: Any) -> Any:
    """Start the P4Runtime server; returns an object with ``stop()``.

    ``unix:PATH`` addresses (reachable across network namespaces) are served by the
    same servicer on a server built here, since the shared `serve` reads a TCP port
    back from its address.
    """
    from softswitch.p4runtime.server import serve
    if not address.startswith("unix:"):
        return serve(device, address, tls=tls)
    from concurrent import futures

    import grpc
    from p4.v1 import p4runtime_pb2_grpc as PG

    from softswitch.p4runtime.server import P4RuntimeServicer
    from softswitch.p4runtime.service import P4RuntimeService
    service = P4RuntimeService(device)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="p4rt"),
                         options=[("grpc.max_receive_message_length", 256 << 20),
                                  ("grpc.max_send_message_length", 256 << 20)])
    PG.add_P4RuntimeServicer_to_server(P4RuntimeServicer(service), server)
    creds = tls.credentials() if tls is not None else None
    ok = server.add_secure_port(address, creds) if creds else server.add_insecure_port(address)
    if not ok:
        service.close()
        raise SwitchdError(f"--grpc-server-addr {address}: cannot listen there")
    server.start()
    LOG.info("P4Runtime server for device %d on %s", device.device_id, address)

    class _Handle:
        def stop(self, grace_s: float = 0.5) -> None:
            server.stop(grace_s).wait()
            service.close()
    return _Handle()
