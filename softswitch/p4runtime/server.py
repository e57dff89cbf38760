"""The p4.v1.P4Runtime gRPC server: grpcio around `P4RuntimeService`, optional TLS.

    handle = serve(device, "127.0.0.1:9559", tls=TlsConfig.from_files(cert, key, ca))
    ...
    handle.stop()

Why this shell is thin: every rule lives in the service; here a `P4RuntimeError`
becomes the RPC status (a failed write batch carries one p4.v1.Error per update
in the google.rpc.Status details, as PI/BMv2 send them), and each StreamChannel
gets a reader thread and a bounded outgoing queue so a slow client never blocks
the data path (overflowing packet-ins and digests are dropped and counted).
"""
from __future__ import annotations

import collections
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2 as P
from p4.v1 import p4runtime_pb2_grpc as PG

from softswitch.p4runtime.arbitration import StreamClient
from softswitch.p4runtime.device import Device
from softswitch.p4runtime.errors import P4RuntimeError
from softswitch.p4runtime.service import P4RuntimeService, WriteFailed

LOG = logging.getLogger("softswitch.p4runtime")
STREAM_QUEUE = 4096


class _Status(collections.namedtuple("_Status", ("code", "details", "trailing_metadata")), grpc.Status):
    """A grpc.Status carrying a binary google.rpc.Status (what grpcio-status builds)."""


def _abort(context: grpc.ServicerContext, exc: P4RuntimeError) -> None:
    LOG.debug("refused: %s: %s", exc.code.name, exc.message)
    if isinstance(exc, WriteFailed):
        st = status_pb2.Status(code=code_pb2.UNKNOWN, message=exc.message)
        for err in exc.errors:
            a = any_pb2.Any()
            a.Pack(err)
            st.details.append(a)
        context.abort_with_status(_Status(grpc.StatusCode.UNKNOWN, exc.message,
                                          (("grpc-status-details-bin", st.SerializeToString()),)))
    context.abort(exc.code, exc.message)


def _internal(context: grpc.ServicerContext, rpc: str, exc: Exception) -> None:
    LOG.error("%s failed unexpectedly", rpc, exc_info=exc)
    context.abort(grpc.StatusCode.INTERNAL, f"{rpc}: internal error: {type(exc).__name__}: {exc}")


_R = TypeVar("_R")


class _End:
    """Ends a stream's outgoing queue; `error` set when the stream must fail."""

    def __init__(self, error: P4RuntimeError | None = None) -> None:
        self.error = error


class P4RuntimeServicer(PG.P4RuntimeServicer):
    def __init__(self, service: P4RuntimeService) -> None:
        self.service = service
        self.dropped_stream_messages = 0

    def Capabilities(self, request: P.CapabilitiesRequest, context: grpc.ServicerContext) -> P.CapabilitiesResponse:
        return self.service.capabilities(request)

    @staticmethod
    def _unary(rpc: str, call: Callable[[], _R], context: grpc.ServicerContext) -> _R:
        """Run one unary call, mapping refusals to their gRPC code and bugs to INTERNAL.

        The one place where service errors become gRPC statuses, so every RPC answers
        them the same way and a bug never takes the server down.
        """
        try:
            return call()
        except P4RuntimeError as exc:
            _abort(context, exc)
            raise
        except Exception as exc:  # a bug: answer INTERNAL, keep serving
            _internal(context, rpc, exc)
            raise

    def SetForwardingPipelineConfig(self, request: P.SetForwardingPipelineConfigRequest,
                                    context: grpc.ServicerContext) -> P.SetForwardingPipelineConfigResponse:
        return self._unary("SetForwardingPipelineConfig",
                           lambda: self.service.set_pipeline(request), context)

    def GetForwardingPipelineConfig(self, request: P.GetForwardingPipelineConfigRequest,
                                    context: grpc.ServicerContext) -> P.GetForwardingPipelineConfigResponse:
        return self._unary("GetForwardingPipelineConfig",
                           lambda: self.service.get_pipeline(request), context)

    def Write(self, request: P.WriteRequest, context: grpc.ServicerContext) -> P.WriteResponse:
        return self._unary("Write", lambda: self.service.write(request), context)

    def Read(self, request: P.ReadRequest, context: grpc.ServicerContext) -> Iterator[P.ReadResponse]:
        # Read streams, but the whole answer is built first so a refusal is one status.
        yield from self._unary("Read", lambda: list(self.service.read(request)), context)

    def StreamChannel(self, request_iterator: Iterator[P.StreamMessageRequest],
                      context: grpc.ServicerContext) -> Iterator[P.StreamMessageResponse]:
        out: queue.Queue[Any] = queue.Queue(maxsize=STREAM_QUEUE)

        def send(msg: P.StreamMessageResponse) -> None:
            try:
                out.put_nowait(msg)
            except queue.Full:
                self.dropped_stream_messages += 1

        client = StreamClient(send=send, name=context.peer())
        session = self.service.open_stream(client)

        def reader() -> None:
            end = _End()
            try:
                for req in request_iterator:
                    session.handle(req)
            except P4RuntimeError as exc:
                end = _End(exc)
            except grpc.RpcError as exc:  # the client hung up
                LOG.debug("stream %s ended: %s", client.name, exc)
            except Exception as exc:  # a bug: end this stream with INTERNAL, keep serving
                LOG.error("stream %s failed unexpectedly", client.name, exc_info=exc)
                end = _End(P4RuntimeError(grpc.StatusCode.INTERNAL, f"StreamChannel: internal error: {exc}"))
            finally:
                session.close()
                out.put(end)

        context.add_callback(lambda: out.put(_End()))
        threading.Thread(target=reader, name="p4rt-stream", daemon=True).start()
        try:
            while True:
                item = out.get()
                if isinstance(item, _End):
                    if item.error is not None:
                        _abort(context, item.error)
                    return
                yield item
        finally:
            session.close()


@dataclass(slots=True, frozen=True, kw_only=True)
class TlsConfig:
    """Server certificate and key (PEM); with `ca`, clients must present a certificate it signed."""

    cert: bytes
    key: bytes
    ca: bytes | None = None

    @classmethod
    def from_files(cls, cert: str | Path, key: str | Path, ca: str | Path | None = None) -> TlsConfig:
        return cls(cert=Path(cert).read_bytes(), key=Path(key).read_bytes(),
                   ca=Path(ca).read_bytes() if ca is not None else None)

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials([(self.key, self.cert)], root_certificates=self.ca,
                                           require_client_auth=self.ca is not None)


class ServerHandle:
    """A running server: `address` is where it listens (the real port if 0 was asked)."""

    def __init__(self, server: grpc.Server, service: P4RuntimeService, servicer: P4RuntimeServicer,
                 address: str) -> None:
        self.server = server
        self.service = service
        self.servicer = servicer
        self.address = address
        self.port: int | None = None if address.startswith("unix:") else int(address.rsplit(":", 1)[1])
        self._stopped = False

    def stop(self, grace_s: float = 0.5) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.server.stop(grace_s).wait()
        self.service.close()

    def wait(self, timeout_s: float | None = None) -> bool:
        return self.server.wait_for_termination(timeout_s)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(device: Device, address: str = "127.0.0.1:9559", *, tls: TlsConfig | None = None,
          max_workers: int = 16) -> ServerHandle:
    """Start a P4Runtime server for `device` on `address`.

    ``host:port`` (port 0 = any free one; the handle's `address` has the real port) or
    ``unix:PATH`` (a Unix socket, reachable from every network namespace).
    """
    service = P4RuntimeService(device)
    servicer = P4RuntimeServicer(service)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="p4rt"),
                         options=[("grpc.max_receive_message_length", 256 << 20),
                                  ("grpc.max_send_message_length", 256 << 20),
                                  ("grpc.so_reuseport", 0)])
    PG.add_P4RuntimeServicer_to_server(servicer, server)
    try:
        if tls is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, tls.credentials())
    except RuntimeError as exc:
        service.close()
        raise P4RuntimeError(grpc.StatusCode.UNAVAILABLE, f"P4Runtime server: cannot listen on "
                                                          f"{address}: {exc}") from None
    if port == 0:
        service.close()
        raise P4RuntimeError(grpc.StatusCode.UNAVAILABLE, f"P4Runtime server: cannot listen on {address}")
    server.start()
    bound = address if address.startswith("unix:") else f"{address.rsplit(':', 1)[0]}:{port}"
    LOG.info("P4Runtime server for device %d on %s%s", device.device_id, bound, " (TLS)" if tls else "")
    return ServerHandle(server, service, servicer, bound)
