/* Host INT sink: tc clsact ingress program, or XDP with -DSINK_XDP=1 (bcc).
 *
 * For UDP to INT_UDP_PORT carrying an INT-MD shim: validate shim, MD header and
 * the hop stack (<= 8 hops, hop ML == bitmaps), read the BTH behind it, update
 * per-flow state and the flow's open run of consecutive PSNs, emit one struct
 * int_host_record to the "records" ring buffer when that run closes (it covers up
 * to RUN_PACKETS packets; the packet that closed it is its INT sample), and remove
 * the INT bytes, restoring the UDP destination port, UDP and IPv4 lengths and the
 * IPv4 checksum, so the stack sees the packet exactly as it was sent.
 * Plain RoCEv2 (UDP 4791) only updates per-flow state; anything else passes.
 * Malformed INT is never modified: it passes up unchanged (nobody listens on
 * INT_UDP_PORT, so the stack discards it) or, with MALFORMED_DROP=1, is dropped
 * here; either way its reason is counted in "stats".
 *
 * Runs (formats/FORMATS.md "Host records"): the open run is one word of the flow
 * entry, swapped with cmpxchg by the packet path and with xchg by int_sink_flush
 * (run by the agent with BPF_PROG_TEST_RUN for idle flows and when it stops); who
 * swaps a run out records it, so every stripped packet is in exactly one record.
 * The per-packet path reads headers straight from the packet when its linear part
 * holds them, and keeps the tick clock (bpf_ktime_get_coarse_ns): a record per
 * packet and the fine clock were most of the cost (bench/bench_ebpf.py --profile).
 *
 * Packets that pass return TC_ACT_UNSPEC, so later tc filters on the hook still run.
 * The XDP build (entry int_sink_xdp) does the same before the stack allocates an skb:
 * it rewrites the headers in place behind the INT bytes and moves the packet start
 * with bpf_xdp_adjust_head; it runs before any tc program (the loss emulator too).
 *
 * INT echo (INT_ECHO=1, formats/int_echo.py): the sink also keeps each QP's latest
 * hop records, ready to send (struct int_echo_entry), in the data flow's entry (one
 * lookup per packet for both), and the tc egress program int_echo_egress appends
 * them to the next ACK of that QP, after its ICRC, flagging it in the BTH resv8a
 * byte: the sender gets INT in every ACK, as from an HPCC NIC, without the
 * controller on the path. The "echo" map leads it from (peer, local, QP) to the
 * flow's key. Both programs share the maps.
 *
 * Parameters (-D cflags): INT_UDP_PORT, RINGBUF_PAGES, FLOW_ENTRIES, MALFORMED_DROP,
 * SINK_XDP, INT_ECHO, ECHO_ENTRIES, RUN_PACKETS, RUN_NS (BENCH_OMIT: the bench only).
 * Headers are read straight from the packet when its linear part holds them, else
 * through bpf_skb_load_bytes / bpf_xdp_load_bytes (bounds-checked, works on
 * non-linear packets); the hop stack, for the packets whose hops are read, is copied
 * once into a per-CPU scratch buffer and read there with masked offsets; all loops
 * are bounded by INT_MAX_HOPS.
 */
#include <uapi/linux/bpf.h>
#include <uapi/linux/if_ether.h>
#include <uapi/linux/in.h>
#include <uapi/linux/ip.h>
#include <uapi/linux/udp.h>
#include <uapi/linux/pkt_cls.h>
#include "int_formats.h"

#ifndef RINGBUF_PAGES
#define RINGBUF_PAGES 64
#endif
#ifndef FLOW_ENTRIES
#define FLOW_ENTRIES 65536
#endif
#ifndef MALFORMED_DROP
#define MALFORMED_DROP 0
#endif
#ifndef SINK_XDP
#define SINK_XDP 0
#endif
#ifndef INT_ECHO
#define INT_ECHO 0
#endif
#ifndef ECHO_ENTRIES
#define ECHO_ENTRIES 16384
#endif
#ifndef RUN_PACKETS
#define RUN_PACKETS 16
#endif
#ifndef RUN_NS
#define RUN_NS 1000000
#endif
/* bench/bench_ebpf.py --profile only: leave parts out to see what each costs */
#ifndef BENCH_OMIT
#define BENCH_OMIT 0
#endif
#define OMIT_RECORD 1
#define OMIT_HOPS 2
#define OMIT_FLOW 4
#define OMIT_STRIP 8
#define OMIT_STACK 16
#define OMIT_ECHO_COPY 32
#define OMIT(part) (BENCH_OMIT & (part))

#if SINK_XDP
#define CTX_T struct xdp_md
#define LOAD(c, off, buf, len) bpf_xdp_load_bytes(c, off, buf, len)
#define PKT_LEN(c) ((__u32)((long)(c)->data_end - (long)(c)->data))
#define IFINDEX(c) ((c)->ingress_ifindex)
#define ACT_PASS XDP_PASS
#define ACT_DROP XDP_DROP
#else
#define CTX_T struct __sk_buff
#define LOAD(c, off, buf, len) bpf_skb_load_bytes(c, off, buf, len)
#define PKT_LEN(c) ((c)->len)
#define IFINDEX(c) ((c)->ifindex)
#define ACT_PASS TC_ACT_UNSPEC
#define ACT_DROP TC_ACT_SHOT
#endif

#define L2_LEN 14
#define L3_OFF L2_LEN
#define L4_OFF (L2_LEN + 20)
#define INT_OFF (L4_OFF + 8)
#define BTH_LEN 12
#define STACK_MAX (INT_MAX_HOPS * INT_MAX_HOP_BYTES) /* 384 */
#define SCRATCH_LEN 512
#define SCRATCH_MASK (SCRATCH_LEN - 1)
#define FNV_OFFSET 0x811C9DC5u
#define FNV_PRIME 0x01000193u

/* Where each field sits inside one hop record, from the bitmaps (DS bits only
 * count for the HPCC domain). Branch-free on purpose: the verifier then walks one
 * path instead of one per bitmap combination. */
struct hop_layout {
    __u32 o_ports, o_lat, o_queue, o_its, o_ets, o_util, o_txb, o_qb, o_rate, bytes;
    __u32 m_node, m_ports, m_lat, m_queue, m_its, m_ets, m_util, m_txb, m_qb, m_rate;
};

/* The flows map's value: the flow's state and, with the echo, its QP's latest hops,
 * so one lookup per packet serves both. The C code keeps struct int_flow_stats
 * pointers (first member): (struct flow_value *) casts reach the echo. */
struct flow_value {
    struct int_flow_stats st;
#if INT_ECHO
    struct int_echo_entry echo;
#endif
};

struct scratch {
    __u8 buf[SCRATCH_LEN + 16];
    struct hop_layout lay;
    struct flow_value flow_init; /* a new flow entry (its echo part never written) */
};

struct l2l4 {
    struct ethhdr eth;
    struct iphdr ip;
    struct udphdr udp;
} __attribute__((packed));

BPF_RINGBUF_OUTPUT(records, RINGBUF_PAGES);
BPF_TABLE("lru_hash", struct int_flow_key, struct flow_value, flows, FLOW_ENTRIES);
BPF_PERCPU_ARRAY(stats, __u64, STAT_MAX);
BPF_PERCPU_ARRAY(scratch_map, struct scratch, 1);
#if INT_ECHO
/* (peer, local, QP) -> the data flow's key: how the egress program finds the hops */
BPF_TABLE("lru_hash", struct int_echo_key, struct int_flow_key, echo, ECHO_ENTRIES);
#endif

static __always_inline void count(__u32 slot)
{
    __u64 *v = stats.lookup(&slot);
    if (v)
        *v += 1;
}

static __always_inline int malformed(__u32 slot)
{
    count(slot);
    if (MALFORMED_DROP) {
        count(STAT_MALFORMED_DROPPED);
        return ACT_DROP;
    }
    return ACT_PASS;
}

/* Hop fields sit at multiples of 4 inside the stack, which starts the 8-byte aligned
 * scratch buffer: one aligned 32-bit load and a byte swap per field. */
static __always_inline __u32 rd32(const __u8 *b, __u32 off)
{
    off &= SCRATCH_MASK & ~3u;
    return bpf_ntohl(*(const __u32 *)(b + off));
}

static __always_inline __u64 rd64(const __u8 *b, __u32 off)
{
    return (__u64)rd32(b, off) << 32 | rd32(b, off + 4);
}

/* Bytes of one hop record: what hop_layout_of computes as ->bytes, alone. */
static __always_inline __u32 hop_bytes_of(__u32 ins, __u32 ds)
{
    __u32 words = ((ins >> 15) & 1) + ((ins >> 14) & 1) + ((ins >> 13) & 1) +
                  ((ins >> 12) & 1) + 2 * ((ins >> 11) & 1) + 2 * ((ins >> 10) & 1) +
                  ((ins >> 8) & 1) + ((ds >> 15) & 1) + ((ds >> 14) & 1) + ((ds >> 13) & 1);
    return 4 * words;
}

static __always_inline void hop_layout_of(struct hop_layout *l, __u32 ins, __u32 ds)
{
    __u32 n0 = (ins >> 15) & 1, n1 = (ins >> 14) & 1, n2 = (ins >> 13) & 1;
    __u32 n3 = (ins >> 12) & 1, n4 = (ins >> 11) & 1, n5 = (ins >> 10) & 1;
    __u32 n7 = (ins >> 8) & 1, d0 = (ds >> 15) & 1, d1 = (ds >> 14) & 1;
    __u32 d2 = (ds >> 13) & 1;
    l->o_ports = 4 * n0;
    l->o_lat = l->o_ports + 4 * n1;
    l->o_queue = l->o_lat + 4 * n2;
    l->o_its = l->o_queue + 4 * n3;
    l->o_ets = l->o_its + 8 * n4;
    l->o_util = l->o_ets + 8 * n5;
    l->o_txb = l->o_util + 4 * n7;
    l->o_qb = l->o_txb + 4 * d0;
    l->o_rate = l->o_qb + 4 * d1;
    l->bytes = l->o_rate + 4 * d2;
    l->m_node = -n0;
    l->m_ports = -n1;
    l->m_lat = -n2;
    l->m_queue = -n3;
    l->m_its = -n4;
    l->m_ets = -n5;
    l->m_util = -n7;
    l->m_txb = -d0;
    l->m_qb = -d1;
    l->m_rate = -d2;
}

/* What a packet hands on to the ring: a run to record (run == 0: nothing). */
struct run_out {
    __u64 run;
    __u64 first_ns, last_ns;
    struct int_flow_stats *st; /* the flow (0 if it was just made) */
};

static __always_inline void run_counted(struct int_flow_stats *st, __u64 packets)
{
    if (packets) {
        __sync_fetch_and_add(&st->packets, packets);
        __sync_fetch_and_add(&st->int_packets, packets);
    }
}

static __always_inline int run_continues(__u64 run, __u32 psn, __u64 first_ns, __u64 now)
{
    __u64 next = (run + (run >> 24)) & RUN_PSN_MASK;
    return run && psn == next && now - first_ns < RUN_NS;
}

/* The packet joins the flow's open run, or closes it and opens the next. Exactly one
 * of this packet, the flush program and other CPUs swaps each run value out, and
 * whoever does records it: no packet is recorded twice or never. 1: record *out. */
static __always_inline int run_update(struct int_flow_stats *st, __u32 psn, __u64 now,
                                      struct run_out *out)
{
    out->st = st;
    if (RUN_PACKETS <= 1)
        goto alone;
    /* a run's packets are added to the flow's counters when it closes (flows()
     * adds the open run's), one atomic add per run instead of two per packet */
    for (int t = 0; t < 3; t++) {
        __u64 old = *(volatile __u64 *)&st->run;
        __u64 first_ns = st->run_first_ns, last_ns = st->run_last_ns;
        if (run_continues(old, psn, first_ns, now)) {
            if ((old >> 24) + 1 >= RUN_PACKETS) {
                /* the run is full with this packet: record it, the flow has none open */
                if (__sync_val_compare_and_swap(&st->run, old, 0) == old) {
                    run_counted(st, (old >> 24) + 1);
                    out->run = old + RUN_ONE;
                    out->first_ns = first_ns;
                    out->last_ns = now;
                    return 1;
                }
            } else if (__sync_val_compare_and_swap(&st->run, old, old + RUN_ONE) == old) {
                st->run_last_ns = now;
                return 0;
            }
        } else if (__sync_val_compare_and_swap(&st->run, old, RUN_ONE | psn) == old) {
            run_counted(st, old >> 24);
            st->run_first_ns = now;
            st->run_last_ns = now;
            out->run = old;
            out->first_ns = first_ns;
            out->last_ns = last_ns;
            return old != 0;
        }
    }
    count(STAT_RUN_CONTENDED);
alone:
    run_counted(st, 1);
    out->run = RUN_ONE | psn;
    out->first_ns = out->last_ns = now;
    return 1;
}

/* PSN bookkeeping shared by INT and plain RoCEv2 packets; INT packets with a BTH
 * (in_run) also go into the flow's run. 1: record *out. */
static __always_inline int flow_update(struct scratch *s, struct int_flow_key *key,
                                       __u32 psn, __u8 opcode, __u32 bytes, int has_int,
                                       int in_run, __u8 hops, __u64 now, struct run_out *out)
{
    struct int_flow_stats *st = (struct int_flow_stats *)flows.lookup(key);
    if (!st) {
        /* built in scratch (the echo part stays zero): too big for the stack */
        struct flow_value *fv = &s->flow_init;
        struct int_flow_stats *init = &fv->st;
        __builtin_memset(init, 0, sizeof(*init));
        int kept = in_run && RUN_PACKETS > 1; /* counted when its run closes */
        init->packets = kept ? 0 : 1;
        init->bytes = bytes;
        init->int_packets = has_int && !kept ? 1 : 0;
        init->first_ns = now;
        init->last_ns = now;
        init->highest_psn = psn;
        init->last_hop_count = hops;
        init->opcode = opcode;
        if (in_run && RUN_PACKETS > 1) {
            init->run = RUN_ONE | psn;
            init->run_first_ns = init->run_last_ns = now;
        }
        /* BPF_NOEXIST: another CPU may have made the flow meanwhile; then join it */
        if (flows.insert(key, fv) == 0) {
            out->st = 0;
            if (in_run && RUN_PACKETS <= 1) {
                out->run = RUN_ONE | psn;
                out->first_ns = out->last_ns = now;
                return 1;
            }
            return 0;
        }
        st = (struct int_flow_stats *)flows.lookup(key);
        if (!st) {
            out->st = 0;
            out->run = RUN_ONE | psn;
            out->first_ns = out->last_ns = now;
            return in_run;
        }
    }
    if (!in_run) {
        __sync_fetch_and_add(&st->packets, 1);
        if (has_int)
            __sync_fetch_and_add(&st->int_packets, 1);
    }
    __sync_fetch_and_add(&st->bytes, bytes);
    if (has_int)
        st->last_hop_count = hops;
    st->last_ns = now;
    st->opcode = opcode;
    __u32 expected = (st->highest_psn + 1) & 0xFFFFFF;
    __u32 ahead = (psn - expected) & 0xFFFFFF;
    if (ahead == 0) {
        st->highest_psn = psn;
    } else if (ahead < 0x800000) {
        __sync_fetch_and_add(&st->lost_packets, ahead);
        __sync_fetch_and_add(&st->loss_events, 1);
        st->last_gap = ahead;
        st->highest_psn = psn;
    } else {
        __sync_fetch_and_add(&st->out_of_order, 1);
    }
    if (!in_run)
        return 0;
    return run_update(st, psn, now, out);
}

static __always_inline void read_bth(const __u8 *bth, __u8 *opcode, __u32 *qp, __u32 *psn)
{
    *opcode = bth[0];
    *qp = (__u32)bth[5] << 16 | (__u32)bth[6] << 8 | bth[7];
    *psn = (__u32)bth[9] << 16 | (__u32)bth[10] << 8 | bth[11];
}

/* One's complement update of a 16-bit checksum when one 16-bit word changes
 * (RFC 1624, eqn. 3); byte order does not matter as long as all three agree. */
static __always_inline __u16 csum_replace16(__u16 check, __u16 old, __u16 new)
{
    __u32 sum = (__u16)~check + (__u16)~old + (__u32)new;
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    return ~sum;
}

/* Remove int_len bytes after the UDP header and restore UDP/IPv4; 0 on success,
 * -1 if nothing was changed, -2 if the packet was changed and must be dropped. */
static __always_inline int strip_int(CTX_T *ctx, const struct l2l4 *h, __be16 orig_dport,
                                     __u32 int_len, __u16 ip_len, __u16 udp_len)
{
    struct l2l4 nh = *h;
    nh.udp.dest = orig_dport;
    nh.udp.len = bpf_htons(udp_len - int_len);
    nh.ip.tot_len = bpf_htons(ip_len - int_len);
    nh.ip.check = csum_replace16(h->ip.check, h->ip.tot_len, nh.ip.tot_len);
#if SINK_XDP
    /* headers go right in front of the payload, then the packet starts there */
    if (bpf_xdp_store_bytes(ctx, int_len, &nh, sizeof(nh)) < 0)
        return -1;
    if (bpf_xdp_adjust_head(ctx, (int)int_len) < 0)
        return -2;
#else
    /* ADJ_ROOM_NET removes bytes right after the 20-byte IPv4 header: the old UDP
     * header and the first int_len - 8 INT bytes; the new UDP header goes on top */
    if (bpf_skb_adjust_room(ctx, -(__s32)int_len, BPF_ADJ_ROOM_NET, 0) < 0)
        return -1;
    if (bpf_skb_store_bytes(ctx, L3_OFF, &nh.ip, sizeof(nh.ip) + sizeof(nh.udp),
                            BPF_F_RECOMPUTE_CSUM) < 0)
        return -2;
#endif
    return 0;
}

/* Headers: straight from the packet when its linear part holds them (no helper
 * call), else through the bounds-checked copy. len must be a constant. */
static __always_inline int hdr_load(CTX_T *ctx, __u32 off, void *buf, __u32 len)
{
    void *d = (void *)(long)ctx->data, *e = (void *)(long)ctx->data_end;
    off &= 0x7FF; /* INT_OFF + a whole INT header stays below 2 KiB */
    if (d + off + len <= e) {
        __builtin_memcpy(buf, d + off, len);
        return 0;
    }
    return LOAD(ctx, off, buf, len);
}

/* The hop stack into the scratch buffer (once per packet that needs it). */
static __always_inline int load_stack(CTX_T *ctx, struct scratch *s, __u32 stack_len)
{
    if (OMIT(OMIT_STACK) || stack_len == 0 || stack_len > STACK_MAX)
        return 0;
    /* stack_len is a multiple of 4 in 4..384: the mask keeps it, and shows the
     * verifier a length in 4..512 (the buffer holds 528) */
    __u32 n = ((stack_len - 4) & 0x1FC) + 4;
    return LOAD(ctx, INT_OFF + INT_FIXED_LEN, s->buf, n);
}

#if INT_ECHO
/* The echo's hops (node ID, egress timestamp low word, tx bytes, queue bytes, line
 * rate: the wire's big-endian words as they are) straight from the packet, for hop
 * records that hold node ID, egress timestamp and the three DS fields, no tx
 * utilisation (the HPCC profiles: the last four sit together at the record's end).
 * -1: another layout, or the linear part is too short: echo_hops_scratch. */
static __always_inline int echo_hops_direct(CTX_T *ctx, struct int_echo_entry *e,
                                            __u32 nhops, __u32 hop_bytes, __u32 ins,
                                            __u32 ds)
{
    if (!(ins & INS_NODE_ID) || !(ins & INS_EGRESS_TS) || (ins & INS_TX_UTIL) ||
        ds != (DS_TX_BYTES | DS_QUEUE_BYTES | DS_LINE_RATE))
        return -1;
    void *d = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    __u32 tail = (hop_bytes - 16) & 0x3C; /* egress timestamp's low word: 12 or 16 */
    for (__u32 i = 0; i < INT_MAX_HOPS; i++) {
        if (i >= nhops)
            break;
        __u32 b = (INT_OFF + INT_FIXED_LEN + i * hop_bytes) & 0x3FF;
        const __u8 *hp = d + b;
        const __u32 *w = (const __u32 *)(hp + tail);
        if ((const void *)(hp + 4) > end || (const void *)(w + 4) > end)
            return -1;
        __u64 idx = i;
        asm volatile("%0 &= 7" : "+r"(idx));
        /* struct int_echo_hop is packed: whole aligned words, not byte stores */
        __u32 *eh = (__u32 *)&e->bytes[idx * ECHO_HOP_LEN];
        eh[0] = *(const __u32 *)hp;
        eh[1] = w[0];
        eh[2] = w[1];
        eh[3] = w[2];
        eh[4] = w[3];
    }
    return 0;
}

/* The same for any layout, from the hop stack copied to scratch. */
static __always_inline int echo_hops_scratch(CTX_T *ctx, struct scratch *s,
                                             struct int_echo_entry *e, __u32 nhops,
                                             __u32 hop_bytes, __u32 stack_len, __u32 ins,
                                             __u32 ds)
{
    if (load_stack(ctx, s, stack_len) < 0)
        return -1;
    struct hop_layout *lay = &s->lay;
    hop_layout_of(lay, ins, ds);
    for (__u32 i = 0; i < INT_MAX_HOPS; i++) {
        if (i >= nhops)
            break;
        __u64 idx = i;
        asm volatile("%0 &= 7" : "+r"(idx));
        __u32 b = i * hop_bytes;
        /* node ID, egress ts low word, tx bytes, queue bytes, line rate: the wire's
         * big-endian words as they are (no byte swaps), whole aligned words */
        __u32 *eh = (__u32 *)&e->bytes[idx * ECHO_HOP_LEN];
        eh[0] = *(const __u32 *)(s->buf + (b & (SCRATCH_MASK & ~3u))) & lay->m_node;
        eh[1] = *(const __u32 *)(s->buf + ((b + lay->o_ets + 4) &
                                           (SCRATCH_MASK & ~3u))) & lay->m_ets;
        eh[2] = *(const __u32 *)(s->buf + ((b + lay->o_txb) & (SCRATCH_MASK & ~3u))) &
                lay->m_txb;
        eh[3] = *(const __u32 *)(s->buf + ((b + lay->o_qb) & (SCRATCH_MASK & ~3u))) &
                lay->m_qb;
        eh[4] = *(const __u32 *)(s->buf + ((b + lay->o_rate) & (SCRATCH_MASK & ~3u))) &
                lay->m_rate;
    }
    return 0;
}
#endif

#if SINK_XDP
int int_sink_xdp(struct xdp_md *skb)
#else
int int_sink(struct __sk_buff *skb)
#endif
{
    struct l2l4 h;
    if (hdr_load(skb, 0, &h, sizeof(h)) < 0)
        goto other;
    if (h.eth.h_proto != bpf_htons(ETH_P_IP) || h.ip.protocol != IPPROTO_UDP)
        goto other;
    __u16 dport = bpf_ntohs(h.udp.dest);
    if (h.ip.frag_off & bpf_htons(0x1FFF))
        goto other; /* not a first fragment: no UDP header here */
    int bad_ip = h.ip.ihl != 5 || (h.ip.frag_off & bpf_htons(0x2000));
    if (h.ip.ihl != 5) {
        /* options move the UDP header: find its port only to count INT we leave alone */
        __be16 p;
        if (h.ip.ihl < 5 || LOAD(skb, L3_OFF + h.ip.ihl * 4 + 2, &p, 2) < 0)
            goto other;
        dport = bpf_ntohs(p);
    }
    /* flows and runs keep the tick-resolution clock (a fine clock read costs as much
     * as the rest of the per-packet bookkeeping); host records the fine one */
    __u64 now = bpf_ktime_get_coarse_ns();
    struct int_flow_key key = {};
    struct run_out run = {};
    __u8 bth[BTH_LEN];
    __u8 opcode = 0;
    __u32 qp = 0, psn = 0;
    __u32 zero = 0;
    struct scratch *s = scratch_map.lookup(&zero);
    if (!s)
        goto other;

    if (dport == ROCEV2_UDP_PORT) {
        if (bad_ip || hdr_load(skb, INT_OFF, bth, BTH_LEN) < 0)
            goto other;
        read_bth(bth, &opcode, &qp, &psn);
        key.src_ip = bpf_ntohl(h.ip.saddr);
        key.dst_ip = bpf_ntohl(h.ip.daddr);
        key.src_port = bpf_ntohs(h.udp.source);
        key.dest_qp = qp;
        flow_update(s, &key, psn, opcode, bpf_ntohs(h.ip.tot_len), 0, 0, 0, now, &run);
        count(STAT_ROCE_PLAIN);
        return ACT_PASS;
    }
    if (dport != INT_UDP_PORT)
        goto other;
    if (bad_ip)
        return malformed(STAT_BAD_IP);

    struct {
        struct int_shim shim;
        struct int_md_hdr md;
    } __attribute__((packed)) ih;
    if (hdr_load(skb, INT_OFF, &ih, sizeof(ih)) < 0)
        return malformed(STAT_BAD_SHORT);
    if ((ih.shim.type_npt >> 4) != INT_SHIM_TYPE_MD ||
        ((ih.shim.type_npt >> 2) & 3) != INT_SHIM_NPT_UDP_PORT)
        return malformed(STAT_BAD_SHIM);
    __u32 w0 = bpf_ntohl(ih.md.ver_flags_ml_rhc);
    if ((w0 >> 28) != INT_MD_VERSION)
        return malformed(STAT_BAD_VERSION);
    __u16 ins = bpf_ntohs(ih.md.instruction_bitmap);
    __u16 ds_id = bpf_ntohs(ih.md.ds_id);
    __u16 ds_ins = bpf_ntohs(ih.md.ds_instruction);
    __u16 ds_used = ds_id == INT_DS_ID_HPCC ? ds_ins : 0;
    if ((ins & ~INS_SUPPORTED) || (ds_used & ~DS_SUPPORTED))
        return malformed(STAT_BAD_BITMAP);

    __u32 words = ih.shim.length;
    __u32 int_len = INT_SHIM_LEN + words * 4;
    __u16 ip_len = bpf_ntohs(h.ip.tot_len);
    __u16 udp_len = bpf_ntohs(h.udp.len);
    if (words < 3 || INT_OFF + int_len > PKT_LEN(skb) || udp_len < 8 + int_len ||
        ip_len < 28 + int_len || L3_OFF + ip_len > PKT_LEN(skb))
        return malformed(STAT_BAD_LENGTH);
    __u32 stack_len = int_len - INT_FIXED_LEN;
    __u32 ml = (w0 >> 8) & 0x1F;
    struct hop_layout *lay = &s->lay; /* filled only for packets whose hops are read */
    __u32 hop_bytes = hop_bytes_of(ins, ds_used);
    if (ml * 4 != hop_bytes)
        return malformed(STAT_BAD_HOP_ML);
    __u32 nhops = 0;
    if (hop_bytes == 0) {
        if (stack_len != 0)
            return malformed(STAT_BAD_HOP_ML);
    } else {
        if (stack_len > STACK_MAX) {
            /* cannot be <= 8 hops of at most 48 B; still tell ML errors apart */
            if (stack_len % hop_bytes)
                return malformed(STAT_BAD_HOP_ML);
            return malformed(STAT_BAD_TOO_MANY);
        }
        if (stack_len % hop_bytes)
            return malformed(STAT_BAD_HOP_ML);
        nhops = stack_len / hop_bytes;
        if (nhops > INT_MAX_HOPS)
            return malformed(STAT_BAD_TOO_MANY);
    }
    __u16 orig_dport = bpf_ntohs(ih.shim.orig_dport);
    int has_bth = orig_dport == ROCEV2_UDP_PORT;
    if (has_bth) {
        if (hdr_load(skb, INT_OFF + int_len, bth, BTH_LEN) < 0)
            return malformed(STAT_BAD_SHORT);
        read_bth(bth, &opcode, &qp, &psn);
    }

#if !SINK_XDP
    /* a GRO/GSO aggregate holds several packets, each with its own INT: leave it */
    if (skb->gso_segs > 1) {
        count(STAT_STRIP_FAILED);
        return ACT_PASS;
    }
#endif
    __u32 src_ip = bpf_ntohl(h.ip.saddr), dst_ip = bpf_ntohl(h.ip.daddr);
    __u16 src_port = bpf_ntohs(h.udp.source);


    key.src_ip = src_ip;
    key.dst_ip = dst_ip;
    key.src_port = src_port;
    key.dest_qp = qp;
    int emit = OMIT(OMIT_FLOW) ? 1 :
        flow_update(s, &key, psn, opcode, ip_len - int_len, 1, has_bth, nhops, now, &run);
    if (!has_bth) {
        /* no PSN to make runs of: every packet is a run of one */
        emit = 1;
        run.run = RUN_ONE;
        run.first_ns = run.last_ns = now;
    }

#if INT_ECHO
    /* data of a QP (not its ACKs or CNPs coming back): keep its hops for the echo, in
     * the flow entry; the echo map leads the egress program from the QP to it */
    if (has_bth && opcode != 0x11 && opcode != 0x81) {
        struct flow_value *fv = (struct flow_value *)run.st;
        if (!fv)
            fv = flows.lookup(&key); /* the flow's first packet made it */
        struct int_echo_entry *echo_e = 0;
        if (fv)
            echo_e = &fv->echo;
        asm volatile("" : "+r"(echo_e));
        if (echo_e && (echo_e->len == 0 || (psn & 0xFF) == 0)) {
            /* once per flow entry, and again now and then (an LRU may drop it) */
            struct int_echo_key ek = {.peer_ip = src_ip, .local_ip = dst_ip, .qp = qp};
            echo.update(&ek, &key);
        }
        if (echo_e && (OMIT(OMIT_ECHO_COPY) ||
            echo_hops_direct(skb, echo_e, nhops, hop_bytes, ins, ds_used) == 0 ||
            echo_hops_scratch(skb, s, echo_e, nhops, hop_bytes, stack_len, ins,
                              ds_used) == 0)) {
            __u32 n = nhops;
            asm volatile("" : "+r"(n)); /* keep the bound test below for the verifier */
            if (n > INT_MAX_HOPS)
                n = INT_MAX_HOPS;
            /* the trailer (magic, version, hop count, words per hop) as one word */
            *(__u32 *)&echo_e->bytes[n * ECHO_HOP_LEN] =
                ECHO_MAGIC | (ECHO_VERSION << 4) << 8 | n << 16 | ECHO_HOP_WORDS << 24;
            echo_e->psn = psn;
            echo_e->len = ECHO_TRAILER_LEN + n * ECHO_HOP_LEN;
            echo_e->updated_ns = now;
        }
    }
#endif

    /* ---- a run closed: its host record, with this packet as the INT sample ---- */
    if (emit && !OMIT(OMIT_RECORD)) {
        struct int_host_record *r = records.ringbuf_reserve(sizeof(struct int_host_record));
        if (!r) {
            count(STAT_RINGBUF_FULL);
        } else if (load_stack(skb, s, stack_len) < 0) {
            records.ringbuf_discard(r, 0); /* validated above: cannot happen */
            count(STAT_RINGBUF_FULL);
        } else {
            r->capture_ns = bpf_ktime_get_ns();
            r->src_ip = src_ip;
            r->dst_ip = dst_ip;
            r->src_port = src_port;
            r->orig_dport = orig_dport;
            r->dest_qp = qp;
            r->psn = run.run & RUN_PSN_MASK;
            r->ip_total_len = ip_len - int_len;
            r->opcode = opcode;
            r->hop_count = nhops;
            r->instruction_bitmap = ins;
            r->ds_id = ds_id;
            r->ds_instruction = ds_ins;
            r->ds_flags = bpf_ntohs(ih.md.ds_flags);
            r->hop_ml = ml;
            r->remaining_hop_count = w0 & 0xFF;
            r->md_flags = (w0 >> 25) & 7;
            r->ip_tos = h.ip.tos;
            r->ifindex = IFINDEX(skb);
            r->psn_count = run.run >> 24;
            r->sample_psn = psn;
            r->run_first_ns = run.first_ns;
            r->run_last_ns = run.last_ns;
            hop_layout_of(lay, ins, ds_used);
            __u32 sig = FNV_OFFSET;
            __u32 nloop = nhops;
            /* hide "nhops <= 8" from clang, or it drops the i < 8 test the verifier needs */
            asm volatile("" : "+r"(nloop));
            for (__u32 i = 0; i < (OMIT(OMIT_HOPS) ? 0 : INT_MAX_HOPS); i++) {
                __u64 idx = i;
                /* a mask clang cannot drop: the verifier sees idx in 0..7 */
                asm volatile("%0 &= 7" : "+r"(idx));
                /* the record as 7 words: ts, ts, node|lat, queue|util, txb|qb, rate|ports, qid */
                __u64 *w = (__u64 *)&r->hops[idx];
                if (i >= nloop) {
                    w[0] = w[1] = w[2] = w[3] = w[4] = w[5] = w[6] = 0;
                    continue;
                }
                __u32 b = i * hop_bytes;
                __u32 node = rd32(s->buf, b) & lay->m_node;
                sig = (sig ^ node) * FNV_PRIME;
                __u32 ports = rd32(s->buf, b + lay->o_ports) & lay->m_ports;
                __u32 q = rd32(s->buf, b + lay->o_queue) & lay->m_queue;
                w[0] = rd64(s->buf, b + lay->o_its) & ((__u64)lay->m_its << 32 | lay->m_its);
                w[1] = rd64(s->buf, b + lay->o_ets) & ((__u64)lay->m_ets << 32 | lay->m_ets);
                w[2] = node | (__u64)(rd32(s->buf, b + lay->o_lat) & lay->m_lat) << 32;
                w[3] = (q & 0xFFFFFF) |
                       (__u64)(rd32(s->buf, b + lay->o_util) & lay->m_util) << 32;
                w[4] = (rd32(s->buf, b + lay->o_txb) & lay->m_txb) |
                       (__u64)(rd32(s->buf, b + lay->o_qb) & lay->m_qb) << 32;
                w[5] = (rd32(s->buf, b + lay->o_rate) & lay->m_rate) |
                       (__u64)(ports >> 16) << 32 | (__u64)(ports & 0xFFFF) << 48;
                w[6] = q >> 24;
            }
            records.ringbuf_submit(r, 0);
            if (run.st)
                run.st->path_signature = (ins & INS_NODE_ID) ? sig : 0;
        }
    }

    /* ---- strip ---- */
    int rc = OMIT(OMIT_STRIP) ? 0 : strip_int(skb, &h, ih.shim.orig_dport, int_len, ip_len, udp_len);
    if (rc < 0) {
        count(STAT_STRIP_FAILED);
        return rc == -1 ? ACT_PASS : ACT_DROP;
    }
    count(STAT_INT_STRIPPED);
    return ACT_PASS;

other:
    count(STAT_OTHER);
    return ACT_PASS;
}

/* BPF_PROG_TEST_RUN by the agent (ebpf.sink.IntSink.flush_runs): record and close the
 * open runs of the flows whose keys follow a struct int_flush_hdr in the data, so a
 * flow that went idle (or a sink about to stop) leaves no packet unrecorded. The run
 * is swapped out only once its record has room in the ring. Returns runs recorded,
 * with FLUSH_RING_FULL when the ring filled before the last key. */
int int_sink_flush(struct __sk_buff *skb)
{
    struct int_flush_hdr fh;
    if (bpf_skb_load_bytes(skb, 0, &fh, sizeof(fh)) < 0 || fh.magic != FLUSH_MAGIC)
        return -1;
    __u64 now = bpf_ktime_get_ns();
    int done = 0;
    for (__u32 i = 0; i < FLUSH_MAX_KEYS; i++) {
        if (i >= fh.count)
            break;
        struct int_flow_key k;
        if (bpf_skb_load_bytes(skb, sizeof(fh) + i * sizeof(k), &k, sizeof(k)) < 0)
            break;
        struct int_flow_stats *st = (struct int_flow_stats *)flows.lookup(&k);
        if (!st || !st->run)
            continue;
        struct int_host_record *r = records.ringbuf_reserve(sizeof(struct int_host_record));
        if (!r) {
            count(STAT_RINGBUF_FULL); /* the run stays open: nothing lost */
            return done | FLUSH_RING_FULL;
        }
        __u64 first_ns = st->run_first_ns, last_ns = st->run_last_ns;
        __u64 run = __sync_lock_test_and_set(&st->run, 0);
        if (!run) {
            records.ringbuf_discard(r, 0);
            continue;
        }
        __builtin_memset(r, 0, sizeof(*r));
        r->capture_ns = now;
        r->src_ip = k.src_ip;
        r->dst_ip = k.dst_ip;
        r->src_port = k.src_port;
        r->orig_dport = ROCEV2_UDP_PORT;
        r->dest_qp = k.dest_qp;
        r->psn = run & RUN_PSN_MASK;
        r->opcode = st->opcode;
        r->psn_count = run >> 24;
        r->sample_psn = (run + (run >> 24) - 1) & RUN_PSN_MASK; /* its last packet */
        r->run_first_ns = first_ns;
        r->run_last_ns = last_ns;
        records.ringbuf_submit(r, 0);
        run_counted(st, run >> 24);
        count(STAT_RUNS_FLUSHED);
        done++;
    }
    return done;
}

#if INT_ECHO && !SINK_XDP
/* tc egress: append the QP's latest hop records to an outgoing ACK (see the top). */
int int_echo_egress(struct __sk_buff *skb)
{
    struct l2l4 h;
    __u8 bth[BTH_LEN];
    if (bpf_skb_load_bytes(skb, 0, &h, sizeof(h)) < 0)
        return TC_ACT_UNSPEC;
    if (h.eth.h_proto != bpf_htons(ETH_P_IP) || h.ip.protocol != IPPROTO_UDP ||
        h.ip.ihl != 5 || (h.ip.frag_off & bpf_htons(0x3FFF)) ||
        h.udp.dest != bpf_htons(ROCEV2_UDP_PORT))
        return TC_ACT_UNSPEC;
    if (bpf_skb_load_bytes(skb, INT_OFF, bth, BTH_LEN) < 0 || bth[0] != 0x11 ||
        (bth[4] & ECHO_BTH_FLAG))
        return TC_ACT_UNSPEC;
    struct int_echo_key ek = {};
    ek.peer_ip = bpf_ntohl(h.ip.daddr);
    ek.local_ip = bpf_ntohl(h.ip.saddr);
    ek.qp = (__u32)bth[5] << 16 | (__u32)bth[6] << 8 | bth[7];
    struct int_flow_key *fk = echo.lookup(&ek);
    struct flow_value *fv = 0;
    if (fk)
        fv = flows.lookup(fk);
    struct int_echo_entry *e = 0;
    if (fv)
        e = &fv->echo;
    asm volatile("" : "+r"(e));
    __u32 len = e ? e->len : 0;
    asm volatile("" : "+r"(len));
    if (len < ECHO_TRAILER_LEN + ECHO_HOP_LEN) {
        count(STAT_ECHO_NO_HOPS);
        return TC_ACT_UNSPEC;
    }
    if (!e || len > ECHO_MAX_LEN) {
        count(STAT_ECHO_FAILED);
        return TC_ACT_UNSPEC;
    }
    __u16 ip_len = bpf_ntohs(h.ip.tot_len);
    __u32 old = skb->len;
    if (skb->gso_segs > 1 || L3_OFF + ip_len != old || old > 0xFFFF - ECHO_MAX_LEN) {
        count(STAT_ECHO_FAILED);
        return TC_ACT_UNSPEC;
    }
    /* grow first: if that fails nothing has changed */
    if (bpf_skb_change_tail(skb, old + len, 0) < 0) {
        count(STAT_ECHO_FAILED);
        return TC_ACT_UNSPEC;
    }
    struct l2l4 nh = h;
    nh.ip.tot_len = bpf_htons(ip_len + len);
    nh.ip.check = csum_replace16(h.ip.check, h.ip.tot_len, nh.ip.tot_len);
    nh.udp.len = bpf_htons(bpf_ntohs(h.udp.len) + len);
    nh.udp.check = 0; /* RoCEv2 sends 0; a checksum would no longer cover the echo */
    __u8 flags = bth[4] | ECHO_BTH_FLAG;
    /* the bound test above is lost to the compiler's spills: mask again, 1..256 */
    __u64 n = len - 1;
    asm volatile("%0 &= 0xff" : "+r"(n));
    if (bpf_skb_store_bytes(skb, old, e->bytes, n + 1, 0) < 0 ||
        bpf_skb_store_bytes(skb, L3_OFF, &nh.ip, sizeof(nh.ip) + sizeof(nh.udp), 0) < 0 ||
        bpf_skb_store_bytes(skb, INT_OFF + 4, &flags, 1, 0) < 0) {
        count(STAT_ECHO_FAILED);
        return TC_ACT_SHOT; /* half-written: the ACK would not verify anyway */
    }
    count(STAT_ECHO_APPENDED);
    return TC_ACT_UNSPEC;
}
#endif
