"""Pure parts of the P4Runtime layer, without gRPC: byte-string codec, controller headers,
device-config detection, arbitration rules."""
from __future__ import annotations

import io
import tarfile
import zipfile

import grpc
import pytest
from p4.config.v1 import p4info_pb2 as P4I
from p4.v1 import p4runtime_pb2 as P
from p4rt_helpers import msg

from softswitch.p4runtime.arbitration import Arbitrator, StreamClient
from softswitch.p4runtime.codec import decode_bits, decode_signed, encode_bits, encode_signed
from softswitch.p4runtime.config import decode_device_config
from softswitch.p4runtime.controller_header import ControllerHeader
from softswitch.p4runtime.errors import DeviceError, P4RuntimeError


@pytest.mark.parametrize("data,width,value", [
    (b"\x00", 8, 0), (b"\x00\x00\x05", 9, 5), (b"\x01\xff", 9, 511), (b"\x0a\x00\x00\x01", 32, 0x0A000001),
    (b"\x00" * 9 + b"\x01", 48, 1),  # padded beyond the width: accepted, value fits
])
def test_decode_bits(data, width, value):
    assert decode_bits(data, width, "x") == value


@pytest.mark.parametrize("data,width,text", [
    (b"", 8, "empty byte string"), (b"\x02\x00", 9, "does not fit bit<9>"), (b"\x01\x00", 8, "does not fit"),
])
def test_decode_bits_refuses(data, width, text):
    with pytest.raises(P4RuntimeError) as ei:
        decode_bits(data, width, "field f")
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT and text in ei.value.message
    assert ei.value.message.startswith("field f: ")


@pytest.mark.parametrize("value,data", [(0, b"\x00"), (1, b"\x01"), (255, b"\xff"), (256, b"\x01\x00"),
                                        (0x0A000001, b"\x0a\x00\x00\x01")])
def test_encode_bits_is_canonical(value, data):
    assert encode_bits(value) == data


def test_signed_round_trip():
    for v in (-128, -1, 0, 5, 127):
        assert decode_signed(encode_signed(v, 8), 8, "x") == v


def _header(fields: list[tuple[str, int]]) -> ControllerHeader:
    m = P4I.ControllerPacketMetadata()
    m.preamble.name = "packet_in"
    for i, (n, w) in enumerate(fields, start=1):
        m.metadata.add(id=i, name=n, bitwidth=w)
    return ControllerHeader.from_p4info(m)


def test_controller_header_codec():
    h = _header([("ingress_port", 9), ("reason", 3), ("_pad", 4)])
    assert h.nbytes == 2
    raw = h.encode({"ingress_port": 0x1FF, "reason": 5})
    assert raw == bytes([0xFF, 0xD0])
    assert h.decode(raw + b"payload") == ({"ingress_port": 0x1FF, "reason": 5, "_pad": 0}, b"payload")
    with pytest.raises(DeviceError, match="does not fit bit<3>"):
        h.encode({"reason": 8})
    with pytest.raises(DeviceError, match="no field"):
        h.encode({"port": 1})
    with pytest.raises(DeviceError, match="shorter than the 2-byte header"):
        h.decode(b"\x01")
    with pytest.raises(DeviceError, match="not a whole number of bytes"):
        _header([("a", 9)])


def _tar(files: dict[str, bytes], mode: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for n, d in files.items():
            ti = tarfile.TarInfo(n)
            ti.size = len(d)
            tf.addfile(ti, io.BytesIO(d))
    return buf.getvalue()


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return buf.getvalue()


PROG = b"control C() { apply {} }\nV1Switch(P(), V(), I(), E(), C(), D()) main;\n"


@pytest.mark.parametrize("blob,kind,main", [
    (PROG, "text", "program.p4"),
    (_tar({"a/prog.p4": PROG, "a/lib.p4": b"// lib"}, "w"), "tar", "a/prog.p4"),
    (_tar({"x.p4": PROG, "main.p4": PROG}, "w:gz"), "tar", "main.p4"),
    (_zip({"one.p4": b"//", "two.p4": PROG, "MAIN": b"one.p4\n"}), "zip", "one.p4"),
])
def test_device_config_forms(blob, kind, main):
    src = decode_device_config(blob)
    assert (src.archive, src.main) == (kind, main)
    assert src.files[main]


def test_device_config_refusals():
    for blob, code, text in [
        (_zip({"MAIN": b"nope.p4", "a.p4": PROG}), grpc.StatusCode.INVALID_ARGUMENT, "MAIN names 'nope.p4'"),
        (b"PK\x03\x04garbage", grpc.StatusCode.INVALID_ARGUMENT, "bad zip archive"),
        (b"\x1f\x8bnot gzip", grpc.StatusCode.INVALID_ARGUMENT, "bad tar archive"),
        (b'  {"targets": []}', grpc.StatusCode.UNIMPLEMENTED, "BMv2 JSON"),
    ]:
        with pytest.raises(P4RuntimeError) as ei:
            decode_device_config(blob)
        assert ei.value.code == code and text in ei.value.message, ei.value.message


class _Inbox:
    def __init__(self) -> None:
        self.got: list[P.StreamMessageResponse] = []

    def __call__(self, m: P.StreamMessageResponse) -> None:
        self.got.append(m)

    def codes(self) -> list[int]:
        return [m.arbitration.status.code for m in self.got]


def _update(eid: int, device_id: int = 1) -> P.MasterArbitrationUpdate:
    return msg(P.MasterArbitrationUpdate, f"device_id: {device_id} election_id {{ high: {eid >> 64} "
                                          f"low: {eid & (2**64 - 1)} }}")


def test_arbitration_rules_without_grpc():
    arb = Arbitrator(1)
    a, b = _Inbox(), _Inbox()
    ca, cb = StreamClient(send=a), StreamClient(send=b)
    arb.arbitrate(ca, _update(2**64 + 5))  # 128-bit election ids compare as numbers
    arb.arbitrate(cb, _update(7))
    assert a.codes() == [0] and b.codes() == [6]
    assert b.got[0].arbitration.election_id == msg(P.Uint128, "high: 1 low: 5")
    arb.check_writer(msg(P.Uint128, "high: 1 low: 5"), "w")
    with pytest.raises(P4RuntimeError) as ei:
        arb.check_writer(msg(P.Uint128, "low: 7"), "w")
    assert ei.value.code == grpc.StatusCode.PERMISSION_DENIED
    arb.remove(ca)
    assert b.codes() == [6, 5]  # told there is no primary
    with pytest.raises(P4RuntimeError):
        arb.check_writer(msg(P.Uint128, "low: 7"), "w")
    with pytest.raises(P4RuntimeError) as ei:
        arb.arbitrate(StreamClient(send=_Inbox()), _update(7))
    assert ei.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(P4RuntimeError) as ei:
        arb.arbitrate(StreamClient(send=_Inbox()), _update(9, device_id=2))
    assert ei.value.code == grpc.StatusCode.NOT_FOUND
