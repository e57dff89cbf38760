"""P4Info like p4c's --p4runtime-files: ids, names, widths, links between objects."""
from __future__ import annotations

from pathlib import Path

from fe_helpers import check, ingress
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from softswitch.frontend import load_program
from softswitch.p4info import build_p4info, format_p4info, jenkins_one_at_a_time, write_p4info

HERE = Path(__file__).parent


def _basic() -> p4info_pb2.P4Info:
    return build_p4info(load_program(HERE / "programs" / "basic.p4"))


def _by_name(items, name):
    return next(i for i in items if i.preamble.name == name)


def test_ids_match_p4c_for_the_tutorial_names():
    # ids p4c assigns to these names (published with the P4 tutorials' basic.p4)
    info = _basic()
    assert _by_name(info.tables, "MyIngress.ipv4_lpm").preamble.id == 37375156
    assert _by_name(info.actions, "NoAction").preamble.id == 21257015
    assert _by_name(info.actions, "MyIngress.drop").preamble.id == 25652968
    assert _by_name(info.actions, "MyIngress.ipv4_forward").preamble.id == 28792405


def test_jenkins_hash_and_prefixes():
    assert jenkins_one_at_a_time("") == 0
    assert (0x01 << 24) | (jenkins_one_at_a_time("NoAction") & 0xFFFFFF) == 21257015
    info = _basic()
    assert _by_name(info.counters, "MyIngress.port_pkts").preamble.id >> 24 == 0x12
    assert info.registers[0].preamble.id == 0x16000001  # @id honoured
    assert _by_name(info.tables, "MyIngress.other").preamble.id == 0x02000007  # prefix added to @id(7)
    # controller header: id from the header type's name, name from the annotation
    cpm = info.controller_packet_metadata[0]
    assert cpm.preamble.name == "packet_out"
    assert cpm.preamble.id == (0x04 << 24) | (jenkins_one_at_a_time("packet_out_header_t") & 0xFFFFFF)


def test_golden_text_matches():
    expected = text_format.Parse((HERE / "golden" / "basic.p4info.txtpb").read_text(), p4info_pb2.P4Info())
    assert _basic() == expected


def test_names_widths_and_links():
    info = _basic()
    fwd = _by_name(info.actions, "MyIngress.ipv4_forward")
    assert [(p.id, p.name, p.bitwidth) for p in fwd.params] == [(1, "dstAddr", 48), (2, "port", 9)]
    assert _by_name(info.actions, "global_set")  # @name(".x") is global
    other = _by_name(info.tables, "MyIngress.other")
    assert [(m.name, m.bitwidth, m.match_type) for m in other.match_fields] == [
        ("hdr.ipv4.isValid()", 1, p4info_pb2.MatchField.EXACT),
        ("src_hi", 8, p4info_pb2.MatchField.TERNARY),
    ]
    assert other.const_default_action_id == 21257015
    assert other.action_refs[1].scope == p4info_pb2.ActionRef.DEFAULT_ONLY


def test_direct_resources_digest_value_set_and_registers():
    info = build_p4info(load_program(HERE / "programs" / "features.p4"))
    lpm = _by_name(info.tables, "MyIngress.ipv4_lpm")
    dc = _by_name(info.direct_counters, "MyIngress.lpm_counter")
    dm = _by_name(info.direct_meters, "MyIngress.lpm_meter")
    assert set(lpm.direct_resource_ids) == {dc.preamble.id, dm.preamble.id}
    assert dc.direct_table_id == lpm.preamble.id and dm.direct_table_id == lpm.preamble.id
    assert dc.preamble.id >> 24 == 0x13 and dm.preamble.id >> 24 == 0x15
    acl = _by_name(info.tables, "MyIngress.acl")
    assert acl.is_const_table
    assert [m.match_type for m in acl.match_fields] == [
        p4info_pb2.MatchField.TERNARY, p4info_pb2.MatchField.RANGE,
        p4info_pb2.MatchField.OPTIONAL, p4info_pb2.MatchField.EXACT]
    dg = info.digests[0]
    assert dg.preamble.name == "learn_t" and dg.preamble.id >> 24 == 0x17
    members = info.type_info.structs["learn_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [("src", 48), ("port", 9)]
    vs = info.value_sets[0]
    assert vs.preamble.name == "MyParser.custom_types" and vs.size == 4 and vs.match[0].bitwidth == 16
    reg = info.registers[0]
    assert reg.type_spec.bitstring.bit.bitwidth == 32 and reg.size == 64
    meter = _by_name(info.meters, "MyIngress.port_meter")
    assert meter.spec.unit == p4info_pb2.MeterSpec.BYTES and meter.size == 16


def test_user_id_collision_is_probed_past():
    locals_ = """
    @id(21257015) action taken() { }
    table t { key = { hdr.a.v: exact; } actions = { taken; NoAction; } }
"""
    info = build_p4info(check(ingress("t.apply();", locals_)))
    assert _by_name(info.actions, "Ing.taken").preamble.id == 21257015
    assert _by_name(info.actions, "NoAction").preamble.id == 21257016


def test_write_formats(tmp_path):
    info = _basic()
    txt, binf, js = tmp_path / "p.txtpb", tmp_path / "p.bin", tmp_path / "p.json"
    write_p4info(info, str(txt))
    write_p4info(info, str(binf))
    write_p4info(info, str(js))
    assert text_format.Parse(txt.read_text(), p4info_pb2.P4Info()) == info
    assert p4info_pb2.P4Info.FromString(binf.read_bytes()) == info
    assert '"MyIngress.ipv4_lpm"' in js.read_text()
    assert format_p4info(info).startswith("# proto-file: p4/config/v1/p4info.proto\n")


def test_top_level_extern_instances_keep_plain_names():
    top = "register<bit<32>>(4) top_reg;\ncounter(4, CounterType.packets) top_ctr;\ncounter(2, CounterType.bytes) unused_ctr;\n"
    info = build_p4info(check(ingress("top_reg.write(0, 1); top_ctr.count(0);", top=top)))
    assert [r.preamble.name for r in info.registers] == ["top_reg"]
    assert [c.preamble.name for c in info.counters] == ["top_ctr"]  # unused instances are left out, as p4c does


def test_selector_table_ids_match_p4c():
    # the ids p4c assigns to these names (its action-selector sample program)
    locals_ = """
    action drop() { mark_to_drop(); }
    action_selector(HashAlgorithm.identity, 32w1024, 32w10) as;
    table indirect_ws { key = { meta.m32: selector; } actions = { drop; NoAction; }
                        const default_action = NoAction(); implementation = as; }
    table indirect_ws_1 { key = { meta.m32: selector; } actions = { drop; NoAction; }
                          const default_action = NoAction(); implementation = as; }
"""
    src = ingress("indirect_ws.apply(); indirect_ws_1.apply();", locals_).replace(" Ing(", " IngressI(")
    src = src.replace("Ing()", "IngressI()")
    info = build_p4info(check(src))
    assert [(t.preamble.name, t.preamble.id) for t in info.tables] == [
        ("IngressI.indirect_ws", 38116258), ("IngressI.indirect_ws_1", 33951097)]
    assert [(a.preamble.name, a.preamble.id) for a in info.actions] == [
        ("NoAction", 21257015), ("IngressI.drop", 23455883)]
    prof = info.action_profiles[0]
    assert (prof.preamble.name, prof.preamble.id, prof.with_selector, prof.size) == ("IngressI.as", 291652621, True, 1024)
    assert list(prof.table_ids) == [38116258, 33951097]
    assert all(not t.match_fields for t in info.tables)  # selector keys are not match fields


def test_initial_default_action_arguments_full_width():
    locals_ = """
    action fwd(bit<9> port, bit<4> q) { sm.egress_spec = port; }
    table t { key = { hdr.a.v: exact; } actions = { fwd; } default_action = fwd(3, 1);
              const entries = { 1: fwd(2, 0); } }
"""
    info = build_p4info(check(ingress("t.apply();", locals_)))
    t = info.tables[0]
    call = t.initial_default_action
    assert call.action_id == info.actions[0].preamble.id and t.const_default_action_id == 0
    assert [(a.param_id, a.value) for a in call.arguments] == [(1, b"\x00\x03"), (2, b"\x01")]
    assert t.is_const_table and t.has_initial_entries


def test_key_without_bit_representation_is_a_located_error():
    import pytest

    from softswitch.p4info import P4InfoError

    top = "enum Color { Red, Blue }\n"
    locals_ = "Color c = Color.Red;\n    table t { key = { c: exact; } actions = { NoAction; } }"
    src = ingress("t.apply();", locals_, top=top)
    with pytest.raises(P4InfoError) as info:
        build_p4info(check(src))
    assert info.value.message == ("key 'c' of table 'Ing.t' has type Color, which P4Runtime "
                                  "cannot represent as a bit string")
    assert info.value.line == next(i for i, l in enumerate(src.split("\n"), 1) if "key = { c: exact" in l)
