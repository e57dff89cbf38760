"""v1model's clones, multicast, resubmit and recirculate on the eBPF target: I2E and
E2E copies to a clone session's ports, the replicas of a multicast group, and packets
that go through ingress again.

Why a clone re-enters the program: the clone must run egress (and the deparser) with
its own metadata while the original goes on, and a tc program has one packet. So at
a clone request the program saves its whole state (`struct pipe`, headers, metadata,
standard metadata) in a slot of a ring of map cells and makes one copy of the packet
per replica with ``bpf_clone_redirect`` into the ingress of the device it came from,
tagged in ``skb->mark`` (magic, kind, replica, slot sequence). The program sees the
copy again, knows it by its mark and, from the slot, builds what v1model gives a
clone (BMv2's simple_switch, as `softswitch.targets.python.pipeline` runs it):

* I2E: the packet as it entered (the copy is taken before the deparser writes), parsed
  again with a fresh metadata that keeps the ``@field_list`` fields of the request;
  ``instance_type`` 1;
* E2E: the original's headers as its egress left them and its payload (the copy's
  bytes still hold the original's headers, which the clone's deparser overwrites);
  fresh metadata with the preserved fields; standard metadata with only
  ``ingress_port``, ``packet_length`` and ``egress_rid``; ``instance_type`` 2;

* a multicast replica (``mcast_grp`` set after ingress): the packet as ingress left it,
  ``instance_type`` 5; the packet itself ends there (multicast replaces unicast);
* resubmit / recirculate: the packet as it came in / as the deparser left it, through
  the parser and ingress again with the request's field list (``instance_type`` 6 / 4
  in ingress, 0 in egress), at most `MAX_PASSES` passes;

then ``egress_port`` and ``egress_rid`` of its replica, the traffic manager, egress,
the deparser, the session's truncation (unless egress truncates) and out. A copy whose
slot was reused before it came back (more than `SLOTS` clones in flight) or whose
session is gone is dropped and counted (``clone_lost``).

Test runs (BPF_PROG_TEST_RUN, no devices) record the marks instead of sending copies,
and the caller runs each as its own pass over the same input (a recirculation over
the pass's output). There the original also waits behind its I2E clones (a RESUME
mark of its own slot; any packet's egress waits behind copies queued before it when
the caller asks), so the passes run in the Python target's order: ingress passes
first, then egress ones in turn (I2E clones, the original, E2E clones).

Sessions and groups live in hash maps written by `KernelReplicationEngine`, the
runtime's replication engine on this target (one runtime API: P4Runtime's
CloneSessionEntry and MulticastGroupEntry, the STF runner's ``mirroring_add`` and
``mc_*``, `SwitchRuntime.clone_session_set` and ``multicast_group_*``).
"""
from __future__ import annotations

import ctypes
from typing import Any

from softswitch.backends.ebpf.errors import EbpfUnsupported
from softswitch.errors import RuntimeApiError, RuntimeErrorCode
from softswitch.frontend import ast as A
from softswitch.v1model.pre import Replica, ReplicationEngine

MAX_REPLICAS = 16          # ports of one clone session or multicast group on this target
SLOTS = 1024               # clone requests in flight (a power of two)
MAX_SESSIONS = 1024
MAX_GROUPS = 1024
MAGIC = 0xC1000000         # top byte of a copy's skb->mark
# kind of a copy (3 bits of the mark), and the instance_type v1model gives it
KIND_I2E, KIND_E2E, KIND_RESUME, KIND_MCAST, KIND_RESUBMIT, KIND_RECIRC = 1, 2, 3, 4, 5, 6
INSTANCE_TYPE = {KIND_I2E: 1, KIND_E2E: 2, KIND_MCAST: 5, KIND_RESUBMIT: 6, KIND_RECIRC: 4}
INGRESS_KINDS = (KIND_RESUBMIT, KIND_RECIRC)   # copies that run ingress (the rest: egress)
MAX_PASSES = 64            # resubmit/recirculate passes of one packet, as the Python target
MAX_MARKS = 32             # marks one test pass records (at most 2 x 16 + 1)
KIND_SHIFT, REP_SHIFT = 21, 17
SEQ_BITS = 17


def mark_kind(mark: int) -> int:
    return (mark >> KIND_SHIFT) & 7


C_TYPES = f"""\
struct p4_clone_rep {{ u32 port; u32 rid; }};
/* a clone session or a multicast group: its replicas (and a session's truncation) */
struct p4_clone_session {{ u32 n; u32 truncate; struct p4_clone_rep reps[{MAX_REPLICAS}]; }};
"""

C_MAPS = f"""\
struct p4_clone_slot {{ u32 seq; u32 session; u32 fl; u32 pad; struct pipe st; }};
BPF_ARRAY(p4_clone_slots, struct p4_clone_slot, {SLOTS});
BPF_ARRAY(p4_clone_seq, u64, 1);
BPF_HASH(p4_clone_sessions, u32, struct p4_clone_session, {MAX_SESSIONS});
BPF_HASH(p4_mcast_groups, u32, struct p4_clone_session, {MAX_GROUPS});
"""

C_FUNCTIONS = f"""\
/* Copy n bytes (a constant) between map cells; volatile: clang must not call memcpy. */
static __always_inline void p4_copy(void *dst, const void *src, u32 n) {{
    volatile u64 *d = dst;
    const volatile u64 *s = src;
#pragma clang loop unroll(disable)
    for (u32 i = 0; i < n / 8; i++) d[i] = s[i];
    volatile u8 *db = (u8 *)dst + (n & ~7u);
    const volatile u8 *sb = (const u8 *)src + (n & ~7u);
#pragma clang loop unroll(disable)
    for (u32 i = 0; i < (n & 7); i++) db[i] = sb[i];
}}

/* A value clang cannot reason about: a loop's exit test stays the one written (clang
   turns `i < n` into `i != n`, which the verifier cannot bound). */
static __always_inline u32 p4_opaque(u32 v) {{
    asm volatile("" : "+r"(v));
    return v;
}}

static __always_inline void p4_record_mark(struct p4_test_result *r, u32 mark) {{
    u32 k = r->nclones & {MAX_MARKS - 1};
    r->marks[k] = mark;
    r->nclones = k + 1;
}}

/* Save P (and the clone request) in the next slot: its sequence + 1, 0 if none. */
static __always_inline u32 slot_save(struct pipe *P) {{
    u32 z = 0;
    u64 *next = p4_clone_seq.lookup(&z);
    if (!next) return 0;
    u32 seq = (u32)__sync_fetch_and_add(next, 1) & {(1 << SEQ_BITS) - 1};
    u32 idx = seq & {SLOTS - 1};
    struct p4_clone_slot *sl = p4_clone_slots.lookup(&idx);
    if (!sl) return 0;
    sl->seq = 0xffffffff;             /* being written: a copy that reads it now is lost */
    sl->session = P->clone_session;
    sl->fl = P->clone_fl;
    p4_copy(&sl->st, P, sizeof(*P));
    sl->seq = seq;
    return seq + 1;
}}

/* One copy per replica of `s`, tagged (kind, replica, slot): test runs record the marks,
   live packets go back into the program through their device's ingress. */
static __always_inline void make_copies(struct __sk_buff *skb, struct p4_test_result *r,
                                        struct p4_clone_session *s, u32 kind, u32 seq) {{
    u32 n = s->n;
    u32 base = {MAGIC:#x} | (kind << {KIND_SHIFT}) | seq;
    if (r) {{
        /* at most 2 x 16 + 1 marks in one pass: the index needs no test per replica */
        u32 k = r->nclones & {MAX_MARKS - 1};
#pragma clang loop unroll(disable)
        for (u32 i = 0; i < {MAX_REPLICAS}; i++) {{
            if (p4_opaque(i) >= n) break;
            u32 j = k + i;
            asm volatile("" : "+r"(j));      /* keep the mask where the verifier sees it */
            r->marks[j & {MAX_MARKS - 1}] = base | (i << {REP_SHIFT});
            r->nclones = j + 1;
        }}
        return;
    }}
    u32 old_mark = skb->mark, failed = 0;
#pragma clang loop unroll(disable)
    for (u32 i = 0; i < {MAX_REPLICAS}; i++) {{
        if (p4_opaque(i) >= n) break;
        skb->mark = base | (i << {REP_SHIFT});
        failed |= bpf_clone_redirect(skb, skb->ifindex, BPF_F_INGRESS) != 0;
    }}
    skb->mark = old_mark;
    if (failed) count_stat(8);
}}

/* One copy (resubmit, recirculate) of the packet as it is now. */
static __always_inline void make_copy(struct __sk_buff *skb, struct p4_test_result *r,
                                      u32 kind, u32 seq) {{
    u32 mark = {MAGIC:#x} | (kind << {KIND_SHIFT}) | seq;
    if (r) {{
        p4_record_mark(r, mark);
        return;
    }}
    u32 old_mark = skb->mark;
    skb->mark = mark;
    if (bpf_clone_redirect(skb, skb->ifindex, BPF_F_INGRESS) != 0) count_stat(8);
    skb->mark = old_mark;
}}

/* A clone request after ingress (I2E) or egress (E2E): the slot's sequence + 1, or 0
   when nothing was cloned (no such session). */
static __always_inline u32 clone_request(struct __sk_buff *skb, struct pipe *P,
                                         struct p4_test_result *r, u32 kind) {{
    u32 sid = P->clone_session;
    struct p4_clone_session *s = p4_clone_sessions.lookup(&sid);
    if (!s || !s->n) return 0;
    u32 seq1 = slot_save(P);
    if (seq1) make_copies(skb, r, s, kind, seq1 - 1);
    return seq1;
}}

/* Multicast after ingress: one copy per replica of group mcast_grp (the slot of an I2E
   clone of this packet holds the same state). Returns the copies made. */
static __always_inline u32 mcast_request(struct __sk_buff *skb, struct pipe *P,
                                         struct p4_test_result *r, u32 seq1) {{
    u32 gid = P->sm.mcast_grp;
    struct p4_clone_session *g = p4_mcast_groups.lookup(&gid);
    if (!g || !g->n) return 0;
    if (!seq1) seq1 = slot_save(P);
    if (!seq1) return 0;
    make_copies(skb, r, g, {KIND_MCAST}, seq1 - 1);
    return g->n;
}}

/* A copy came back (or a test pass names it): fill P from its slot. Returns its kind,
   0 if the slot was reused or the session or group is gone (the copy is lost). */
static __always_inline u32 clone_load(struct pipe *P, u32 mark) {{
    u32 seq = mark & {(1 << SEQ_BITS) - 1};
    u32 rep = (mark >> {REP_SHIFT}) & {MAX_REPLICAS - 1};
    u32 kind = (mark >> {KIND_SHIFT}) & 7;
    u32 idx = seq & {SLOTS - 1};
    struct p4_clone_slot *sl = p4_clone_slots.lookup(&idx);
    if (!sl || sl->seq != seq) return 0;
    if (kind == {KIND_RESUME}) {{
        p4_copy(P, &sl->st, sizeof(*P));
    }} else if (kind == {KIND_RESUBMIT} || kind == {KIND_RECIRC}) {{
        /* a new pass through ingress, keeping the request's field list */
        clone_preserve(P, &sl->st, kind == {KIND_RESUBMIT} ? sl->st.resubmit_fl : sl->st.recirc_fl);
        P->sm.ingress_port = sl->st.sm.ingress_port;
        P->passes = sl->st.passes + 1;
        P->sm.instance_type = kind == {KIND_RESUBMIT} ? 6 : 4;
    }} else {{
        struct p4_clone_session *s;
        u32 id;
        if (kind == {KIND_MCAST}) {{
            id = sl->st.sm.mcast_grp;
            s = p4_mcast_groups.lookup(&id);
        }} else {{
            id = sl->session;
            s = p4_clone_sessions.lookup(&id);
        }}
        if (!s || rep >= s->n) return 0;
        if (kind == {KIND_MCAST}) {{
            /* a replica: the packet as ingress left it */
            p4_copy(P, &sl->st, sizeof(*P));
            P->cl_truncate = 0;
        }} else {{
            clone_preserve(P, &sl->st, sl->fl);
            P->sm.ingress_port = sl->st.sm.ingress_port;
            if (kind == {KIND_E2E}) {{
                p4_copy(&P->hdr, &sl->st.hdr, sizeof(P->hdr));
                P->off = sl->st.off;
                P->pkt_len = sl->st.pkt_len;
                P->sm.packet_length = sl->st.sm.packet_length;
            }}
            P->cl_truncate = s->truncate;
        }}
        P->cl_port = s->reps[rep].port;
        P->cl_rid = s->reps[rep].rid;
        P->passes = sl->st.passes;
        P->sm.instance_type = kind == {KIND_MCAST} ? 5 : kind;   /* 1 I2E, 2 E2E, 5 replica */
    }}
    if (sl->seq != seq) return 0;   /* overwritten while read */
    return kind;
}}
"""

PIPE_FIELDS = ["u32 clone_type;", "u32 clone_session;", "u32 clone_fl;", "u32 truncate_ig;",
               "u32 cl_port;", "u32 cl_rid;", "u32 cl_truncate;", "u32 resubmit_req;",
               "u32 resubmit_fl;", "u32 recirc_req;", "u32 recirc_fl;", "u32 passes;",
               "u32 out_itype;"]


def preserve_c(meta_decl: Any) -> str:
    """``clone_preserve(P, S, fl)``: copy the fields of ``@field_list(fl)`` from S's
    metadata into P's (field lists are constants of the program)."""
    from softswitch.backends.ebpf.layout import cname
    from softswitch.lowering.names import annotation_ints
    lists: dict[int, list[str]] = {}
    for f in getattr(meta_decl, "fields", None) or []:
        for idx in annotation_ints(f, "field_list"):
            lists.setdefault(idx, []).append(cname(f.name))
    lines = ["static __always_inline void clone_preserve(struct pipe *P, struct pipe *S, u32 fl) {",
             "    switch (fl) {"]
    for idx, names in sorted(lists.items()):
        lines.append(f"    case {idx}:")
        lines += [f"        P->meta.{n} = S->meta.{n};" for n in names]
        lines.append("        break;")
    lines += ["    default: break;", "    }", "}"]
    return "\n".join(lines)


def lower_clone(gen: Any, call: A.MethodCallExpression, params: tuple[str, ...]) -> list[str]:
    """``clone(type, session)``, ``clone3(type, session, data)`` (its data is not kept,
    as on the Python target) and ``clone_preserving_field_list(type, session, index)``:
    record the request; the pipeline acts on it after the block (the last one wins)."""
    args = [a.value for a in call.args]
    ctype_arg = args[0]
    member = getattr(ctype_arg, "member", None)
    if member not in ("I2E", "E2E"):
        raise EbpfUnsupported(call, "a clone type that is not CloneType.I2E or CloneType.E2E")
    fl = "0xffffffff"
    if "index" in params:
        idx = args[2].const_value
        if not isinstance(idx, int):
            raise EbpfUnsupported(call, "a field list index that is not a constant")
        fl = str(idx)
    return [f"P->clone_type = {KIND_I2E if member == 'I2E' else KIND_E2E};",
            f"P->clone_session = (u32)({gen.ex(args[1])});",
            f"P->clone_fl = {fl};"]


def lower_pass_request(gen: Any, call: A.MethodCallExpression, request: str,
                       params: tuple[str, ...]) -> list[str]:
    """``resubmit[_preserving_field_list]`` (after ingress) and
    ``recirculate[_preserving_field_list]`` (after egress): the legacy forms keep no
    field, as on the Python target; the last request wins."""
    fl = "0xffffffff"
    if "index" in params:
        idx = call.args[0].value.const_value
        if not isinstance(idx, int):
            raise EbpfUnsupported(call, "a field list index that is not a constant")
        fl = str(idx)
    slot = "resubmit" if request == "resubmit" else "recirc"
    gen.requests.add(slot)      # the pipeline's code for it is generated only then
    return [f"P->{slot}_req = 1;", f"P->{slot}_fl = {fl};"]


class KernelReplicationEngine(ReplicationEngine):
    """The runtime's replication engine on the eBPF target: clone sessions and multicast
    groups are also written to the program's maps (a refused call changes nothing)."""

    def __init__(self, kernel: Any) -> None:
        super().__init__()
        self.kernel = kernel

    def _check(self, where: str, replicas: list[Replica] | list[int], count: int) -> None:
        """What the kernel program can hold: at most MAX_REPLICAS copies, ports it maps."""
        from softswitch.backends.ebpf.program import MAX_PORTS
        if count > MAX_REPLICAS:
            raise RuntimeApiError(RuntimeErrorCode.UNSUPPORTED, f"{where}: {count} replicas "
                                  f"(--target ebpf copies to at most {MAX_REPLICAS} ports)")
        for rep in replicas:
            port = rep.port if isinstance(rep, Replica) else rep
            if not 0 <= port < MAX_PORTS:
                raise RuntimeApiError(RuntimeErrorCode.BAD_VALUE, f"{where}: port {port} "
                                      f"outside 0..{MAX_PORTS - 1}")

    def _write(self, table: str, key: int, replicas: list[Replica], truncate: int = 0) -> None:
        tab = self.kernel.table(table)
        leaf = tab.Leaf()
        leaf.n = len(replicas)
        leaf.truncate = min(truncate, (1 << 32) - 1)
        for i, rep in enumerate(replicas):
            leaf.reps[i].port = rep.port
            leaf.reps[i].rid = rep.rid
        tab[ctypes.c_uint32(key)] = leaf

    # -------------------------------------------------------------- clones
    def session_set(self, session: int, replicas: list[Replica], *, truncate: int = 0,
                    class_of_service: int = 0) -> None:
        where = f"clone session {session}"
        self._check(where, replicas, len(replicas))
        if session not in self.sessions and len(self.sessions) >= MAX_SESSIONS:
            raise RuntimeApiError(RuntimeErrorCode.TABLE_FULL,
                                  f"{where}: {MAX_SESSIONS} clone sessions exist")
        super().session_set(session, replicas, truncate=truncate, class_of_service=class_of_service)
        self._write("p4_clone_sessions", session, replicas, truncate)

    def session_delete(self, session: int) -> None:
        super().session_delete(session)
        del self.kernel.table("p4_clone_sessions")[ctypes.c_uint32(session)]

    # ----------------------------------------------------------- multicast
    def _sync_group(self, group: int) -> None:
        self._write("p4_mcast_groups", group, self.groups[group])

    def _room(self, group: int) -> None:
        if group not in self.groups and len(self.groups) >= MAX_GROUPS:
            raise RuntimeApiError(RuntimeErrorCode.TABLE_FULL,
                                  f"multicast group {group}: {MAX_GROUPS} groups exist")

    def group_create(self, group: int, replicas: list[Replica] | None = None) -> None:
        reps = list(replicas or [])
        self._check(f"multicast group {group}", reps, len(reps))
        self._room(group)
        super().group_create(group, reps)
        self._sync_group(group)

    def group_modify(self, group: int, replicas: list[Replica]) -> None:
        self._check(f"multicast group {group}", replicas, len(replicas))
        super().group_modify(group, replicas)
        self._sync_group(group)

    def group_delete(self, group: int) -> None:
        super().group_delete(group)
        del self.kernel.table("p4_mcast_groups")[ctypes.c_uint32(group)]

    def node_associate(self, group: int, handle: int) -> None:
        node = self.nodes.get(handle)
        if node is not None:
            self._check(f"multicast group {group}", node.ports,
                        len(self.groups.get(group, [])) + len(node.ports))
            self._room(group)
        super().node_associate(group, handle)
        self._sync_group(group)

    def node_update(self, handle: int, ports: list[int]) -> None:
        node = self.nodes.get(handle)
        if node is not None:
            for group in self.node_groups.get(handle, ()):
                self._check(f"multicast group {group}", ports,
                            len(self.groups.get(group, [])) - len(node.ports) + len(ports))
        super().node_update(handle, ports)
        for group in self.node_groups.get(handle, ()):
            if group in self.groups:
                self._sync_group(group)
