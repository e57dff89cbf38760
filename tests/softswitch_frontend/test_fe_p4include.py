"""Our core.p4 / v1model.p4 declare the standard names with the standard signatures."""
from __future__ import annotations

from fe_helpers import check

from softswitch.frontend import ast as A
from softswitch.frontend import types as T

SRC = "#include <core.p4>\n#include <v1model.p4>\n"


def test_standard_names_are_declared():
    top = check(SRC).top_level
    names = ["packet_in", "packet_out", "verify", "NoAction", "standard_metadata_t", "counter", "direct_counter", "meter", "direct_meter", "register", "action_profile", "action_selector", "random", "digest", "mark_to_drop", "hash", "HashAlgorithm", "CloneType", "clone", "clone3", "clone_preserving_field_list", "resubmit_preserving_field_list", "recirculate_preserving_field_list", "truncate", "verify_checksum", "update_checksum", "verify_checksum_with_payload", "update_checksum_with_payload", "assert", "assume", "log_msg", "V1Switch", "Parser", "VerifyChecksum", "Ingress", "Egress", "ComputeChecksum", "Deparser", "PortId_t", "CounterType", "MeterType"]
    assert [n for n in names if n not in top] == []
    methods = {m.name for m in top["packet_in"].methods}
    assert methods == {"extract", "lookahead", "advance", "length"}
    assert {m.name for m in top["packet_out"].methods} == {"emit"}
    assert [m.name for m in top["HashAlgorithm"].members] == [
        "crc32", "crc32_custom", "crc16", "crc16_custom", "random", "identity", "csum16", "xor16"]
    assert [p.name for p in top["V1Switch"].params] == ["p", "vr", "ig", "eg", "ck", "dep"]


def test_errors_match_kinds_and_standard_metadata():
    prog = check(SRC)
    assert prog.errors == ["NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds",
                           "HeaderTooShort", "ParserTimeout", "ParserInvalidArgument"]
    assert prog.match_kinds == ["exact", "ternary", "lpm", "range", "optional", "selector"]
    sm = prog.top_level["standard_metadata_t"]
    assert isinstance(sm, A.StructDecl)
    widths = {f.name: f.type_ref.type for f in sm.fields}
    assert widths == {
        "ingress_port": T.BitsType(9), "egress_spec": T.BitsType(9), "egress_port": T.BitsType(9),
        "instance_type": T.BitsType(32), "packet_length": T.BitsType(32),
        "enq_timestamp": T.BitsType(32), "enq_qdepth": T.BitsType(19), "deq_timedelta": T.BitsType(32),
        "deq_qdepth": T.BitsType(19), "ingress_global_timestamp": T.BitsType(48),
        "egress_global_timestamp": T.BitsType(48), "mcast_grp": T.BitsType(16), "egress_rid": T.BitsType(16),
        "checksum_error": T.BitsType(1), "parser_error": T.ErrorType(), "priority": T.BitsType(3),
    }
