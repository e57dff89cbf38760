"""The INT hop-field table (formats/int_fields.py) is the one definition: the P4 headers,
the C header and every Python layout must say what it says, read from the files."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from controller.int.records import FIELD_BIT_BY_NAME, HOP_DTYPE
from formats import int_md
from formats.int_fields import DS_BIT_WORDS, HOP_FIELDS, STD_BIT_WORDS, word_offsets

ROOT = Path(__file__).resolve().parents[2]
P4 = (ROOT / "p4" / "include" / "headers.p4").read_text()
C = (ROOT / "ebpf" / "int_formats.h").read_text()

_P4_HEADER = re.compile(
    r"header\s+int_(\w+)_h\s*\{([^}]*)\}\s*/\*\s*(DS )?bit (\d+)\s*\*/")
_P4_MEMBER = re.compile(r"bit<(\d+)>\s+(\w+)\s*;")
_C_DEFINE = re.compile(r"#define\s+(\w+)\s+(0[xX][0-9a-fA-F]+|\d+)")
_C_TYPES = {"__u8": 8, "__u16": 16, "__u32": 32, "__u64": 64}


def _p4_headers() -> dict[str, tuple[bool, int, list[tuple[str, int]]]]:
    """int_<name>_h of headers.p4 -> (DS bit?, bit, [(member, width)]), from the bit comments."""
    return {name: (bool(ds), int(b), [(m, int(w)) for w, m in _P4_MEMBER.findall(body)])
            for name, body, ds, b in _P4_HEADER.findall(P4)}


def test_p4_has_one_header_per_row_with_its_parts_and_bit() -> None:
    got = _p4_headers()
    for f in HOP_FIELDS:
        assert f.name in got, f"headers.p4: no header int_{f.name}_h (bit {f.bit})"
        ds, b, members = got[f.name]
        assert (ds, b) == (f.ds, f.bit), f"int_{f.name}_h: bit comment says DS={ds} bit {b}"
        assert members == [(p.name, p.bits) for p in f.parts], f"int_{f.name}_h members"
    assert set(got) == {f.name for f in HOP_FIELDS}, "headers.p4 has hop headers not in the table"


def test_p4_hop_struct_lists_the_rows_in_wire_order() -> None:
    body = re.search(r"struct\s+int_hop_t\s*\{([^}]*)\}", P4)
    assert body is not None, "headers.p4: no struct int_hop_t"
    members = re.findall(r"int_(\w+)_h\s+(\w+)\s*;", body.group(1))
    assert members == [(f.name, f.name) for f in HOP_FIELDS]


def test_c_masks_and_struct_members_follow_the_table() -> None:
    defines = {k: int(v, 0) for k, v in _C_DEFINE.findall(C)}
    for f in HOP_FIELDS:
        name = ("DS_" if f.ds else "INS_") + f.name.upper()
        assert defines.get(name) == f.mask, f"int_formats.h: {name}"
    body = re.search(r"struct\s+int_hop_rec\s*\{([^}]*)\}", C)
    assert body is not None, "int_formats.h: no struct int_hop_rec"
    members = {m: _C_TYPES[t] for t, m in re.findall(r"(__u\d+)\s+(\w+)\s*;", body.group(1))}
    for f in HOP_FIELDS:
        for p in f.parts:
            assert p.name in members, f"struct int_hop_rec has no member {p.name}"
            assert p.bits <= members[p.name], f"int_hop_rec.{p.name} narrower than {p.bits} bits"


def test_python_layouts_are_the_table() -> None:
    """HopRecord, its numpy mirror, the collector's dtype and FIELD bits all come from it."""
    assert int_md.SUPPORTED_INSTRUCTIONS == sum(f.mask for f in HOP_FIELDS if not f.ds)
    assert int_md.SUPPORTED_DS_INSTRUCTIONS == sum(f.mask for f in HOP_FIELDS if f.ds)
    hop_fields = {f.name for f in int_md.HopRecord.__dataclass_fields__.values()}
    for f in HOP_FIELDS:
        assert int_md.hop_words(f.mask if not f.ds else 0, f.mask if f.ds else 0) == f.words
        for p in f.parts:
            assert p.name in hop_fields and p.name in int_md.HOP_RECORD_DTYPE.names
            assert HOP_DTYPE[p.col].itemsize * 8 >= p.bits
        assert FIELD_BIT_BY_NAME[f.name] == f.flag
    flags = [f.flag for f in HOP_FIELDS]
    assert len(set(flags)) == len(flags) and all(x & (x - 1) == 0 for x in flags)
    assert STD_BIT_WORDS == (1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1)  # INT v2.1
    assert DS_BIT_WORDS[:3] == (1, 1, 1)


def test_every_part_round_trips_through_both_codecs() -> None:
    """Distinct values in every part survive HopRecord encoding and the collector's decode."""
    from controller.int.decode import ReportDecoder
    from controller.int.synth import Hop, build_hpcc_report

    ins = int_md.SUPPORTED_INSTRUCTIONS
    ds = int_md.SUPPORTED_DS_INSTRUCTIONS
    values = {p.name: (0x5A5A5A5A5A5A5A5A + i) & ((1 << p.bits) - 1)
              for i, p in enumerate(p for f in HOP_FIELDS for p in f.parts)}
    rec = int_md.HopRecord(**values)
    assert int_md.decode_hops(int_md.encode_hop(rec, ins, ds), ins, ds) == [rec]
    hop = Hop(**{p.col: values[p.name] for f in HOP_FIELDS for p in f.parts})
    got = ReportDecoder().decode([build_hpcc_report(node_id=1, seq=0, hops=[hop],
                                                    ins_bitmap=ins, ds_bitmap=ds)], 0).hops
    assert len(got) == 1
    for f in HOP_FIELDS:
        for p in f.parts:
            assert int(got[0][p.col]) == values[p.name], p.col
    assert int(got[0]["fields"]) == sum(f.flag for f in HOP_FIELDS)
    arr = int_md.hops_to_array([rec])
    assert all(int(arr[0][p.name]) == values[p.name] for f in HOP_FIELDS for p in f.parts)
    assert word_offsets(ins, ds).words == sum(f.words for f in HOP_FIELDS)
    assert np.dtype(HOP_DTYPE).names[:3] == ("sample", "hop_index", "fields")
