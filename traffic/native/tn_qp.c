/* tn_qp.c - requester and responder state machines of one RC QP.
 *
 * Ports of traffic/requester.py and traffic/responder.py, rule for rule: sequence
 * numbers are unbounded inside and folded to 24-bit PSNs on the wire; selective
 * repeat finds losses by transmission order; FEC blocks are closed at k packets, when
 * the QP runs out of packets or is window-blocked with half a block open, and on a
 * (k, m) change; in mode auto each message's plan (struct tn_group, decided by
 * traffic/recovery.py above the engine) codes its groups as interleaved blocks, as
 * traffic/requester.py does; the RTO is
 * RFC 6298 style, doubled per expiry.  Keeping the same rules (and doubles for time)
 * lets tests/traffic_native/test_engine_diff.py compare the two packet by packet.
 *
 * What differs: packets are built when they are sent (from the posted buffer, which
 * is not copied) instead of when they are posted; responders compute each message's
 * CRC-32 as its packets are delivered and keep the bytes only when asked to.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ec.h"
#include "tn_internal.h"

/* responder: FEC symbols kept behind the expected PSN, twice the largest block or
 * interleaved group (traffic.recovery.MAX_GROUP), as traffic/responder.py keeps */
#define KEEP_SYMBOLS 1024
#define FAR_WINDOWS 4
#define MIN_RATE 1000.0
#define MAX_RATE 400e9
#define TN_MAX_GROUP 512        /* data packets in one group, traffic.recovery.MAX_GROUP */
#define TN_MAX_DEPTH 16         /* blocks interleaved in one group, recovery.MAX_DEPTH */
#define MAX_REPAIR_SETS 128    /* blocks in repair: interleaved groups keep several open */

static void seterr(char *err, size_t n, const char *fmt, ...)
{
    if (!err || !n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

/* -- a deque of (a, b) pairs ---------------------------------------------------------- */
struct pair { int64_t a, b; void *ptr; };
struct dq { struct pair *v; uint32_t cap, head, len; };

static int dq_grow(struct dq *d)
{
    uint32_t nc = d->cap ? d->cap * 2 : 64;
    struct pair *nv = malloc(sizeof *nv * nc);
    if (!nv)
        return -1;
    for (uint32_t i = 0; i < d->len; i++)
        nv[i] = d->v[(d->head + i) & (d->cap - 1)];
    free(d->v);
    d->v = nv; d->cap = nc; d->head = 0;
    return 0;
}
static inline struct pair *dq_at(struct dq *d, uint32_t i) { return &d->v[(d->head + i) & (d->cap - 1)]; }
static inline struct pair *dq_front(struct dq *d) { return dq_at(d, 0); }
static int dq_push(struct dq *d, int64_t a, int64_t b, void *ptr)
{
    if (d->len == d->cap && dq_grow(d))
        return -1;
    *dq_at(d, d->len) = (struct pair){a, b, ptr};
    d->len++;
    return 0;
}
static int dq_pushleft(struct dq *d, int64_t a, int64_t b, void *ptr)
{
    if (d->len == d->cap && dq_grow(d))
        return -1;
    d->head = (d->head - 1) & (d->cap - 1);
    d->v[d->head] = (struct pair){a, b, ptr};
    d->len++;
    return 0;
}
static inline struct pair dq_pop(struct dq *d)
{
    struct pair p = d->v[d->head];
    d->head = (d->head + 1) & (d->cap - 1);
    d->len--;
    return p;
}

/* -- token bucket (traffic/pacing.py) ---------------------------------------------------- */
struct bucket { double rate, burst_s, min_burst, tokens, last_t, depth; };

static void bk_refill(struct bucket *b, double now)
{
    if (now > b->last_t) {
        double t = b->tokens + (now - b->last_t) * b->rate / 8;
        b->tokens = t < b->depth ? t : b->depth;
        b->last_t = now;
    }
}
static void bk_set_rate(struct bucket *b, double rate, double now)
{
    bk_refill(b, now);
    b->rate = rate;
    double d = b->rate / 8 * b->burst_s;
    b->depth = b->min_burst > d ? b->min_burst : d;
    if (b->tokens > b->depth)
        b->tokens = b->depth;
}
/* a packet larger than the bucket is deep goes once it is full, leaving it in debt
 * (traffic/pacing.py) */
static int bk_take(struct bucket *b, double n, double now)
{
    bk_refill(b, now);
    if (b->tokens >= (n < b->depth ? n : b->depth)) {
        b->tokens -= n;
        return 1;
    }
    return 0;
}
static double bk_wait(const struct bucket *b, double n)
{
    double need = (n < b->depth ? n : b->depth) - b->tokens;
    return need <= 0 ? 0.0 : need * 8 / b->rate;
}

/* -- requester state ------------------------------------------------------------------ */
struct tpkt {           /* a sent, unacknowledged data packet (slot seq & mask) */
    int64_t seq, msg_no, last_tx, prev_tx, first_tx, block;
    double sent_s, first_sent_s;
    uint32_t off, len, retx;
    uint8_t op, acked, queued, valid, rto_retx;
    uint8_t grp;        /* mode auto: sent inside a group of its message's plan */
};
struct tmsg {
    uint64_t wr_id, msg_id, size, va, first_seq, last_seq;
    const uint8_t *data;
    double posted_s;
    uint32_t retx, crc, npk;
    int op;             /* OP_WRITE_* or OP_SEND_ONLY */
    struct tn_group *groups;  /* mode auto: the plan (a copy), NULL: selective repeat */
    uint32_t n_groups, gi;    /* ... and the first group not behind the send cursor */
};
/* mode auto: the plan group being sent (traffic/requester.py _Group) */
struct tgroup {
    int64_t first_seq;
    uint32_t count, blocks, m, added;
    int live;
};
struct tblock { int64_t bid, base, last, repair_tx; uint32_t count, stride, m; uint8_t live; };

/* -- responder state -------------------------------------------------------------------- */
struct ooo_slot {
    int64_t seq;
    uint8_t present, op, has_reth, repaired;
    uint8_t reth[TN_RETH];
    uint32_t len;
    uint8_t *data;      /* mtu bytes */
};
struct sym_slot { int64_t seq; uint32_t len; uint8_t *data; };  /* FEC symbols */
struct repair_set {
    int64_t base;
    uint32_t count, m, slen, nrep, stride;  /* members base + i x stride */
    uint8_t live;
    uint8_t *rep[16];
};

struct tn_qp {
    struct tn_qp_attr a;
    uint32_t local_ip;
    uint16_t sport, dport;
    struct tn_qp_counters c;
    uint32_t tos;
    /* requester */
    struct bucket bk;
    struct tpkt *slots; uint32_t smask;
    struct tmsg *msgs; uint32_t mcap; int64_t m_head, m_tail; /* [head, tail) live */
    int64_t new_msg, new_idx;   /* cursor of the next never-sent packet */
    int64_t next_seq, una, sent_up_to, tx_counter, hi_tx, msg_id;
    uint64_t va;
    struct dq retx_q, repair_q, tx_order;
    struct tblock *blocks; uint32_t bmask; int64_t block_id;
    int64_t *open_seqs; uint8_t **open_syms; uint32_t *open_lens; uint32_t n_open;
    struct tgroup cg;   /* mode auto: the group being sent, its members' symbols */
    uint8_t **g_syms; uint32_t *g_lens;
    /* mode auto: packets sent outside groups, and their losses (traffic.recovery
     * LossEstimator's inputs: the QP's own loss model when the controller sent none) */
    uint64_t est_sent, est_lost, est_pairs; int64_t est_last;
    double srtt, rttvar, rto, rto_deadline, min_rtt, rtt_cand;  /* <0: None */
    int progress, rtos_unsampled;
    int timers;         /* this poll may fire the retransmission timer */
    double rto_floor;   /* learnt from spurious timeouts (settle_retx_acks) */
    int64_t ack_fresh_tx;  /* within one ACK: the newest never-retransmitted packet ... */
    int64_t *retx_acked; uint32_t n_retx_acked, cap_retx_acked;  /* ... and the resent */
    uint32_t win_pkts;
    /* responder */
    int64_t e, nak_for, msg_rx_id;
    uint32_t msn;
    int ack_due, nak_due;
    struct ooo_slot *ooo; uint32_t omask, ooo_n; int64_t ooo_hi;
    struct sym_slot *syms; uint32_t ymask;
    struct repair_set rsets[MAX_REPAIR_SETS];
    uint8_t rorder[MAX_REPAIR_SETS]; uint32_t n_rorder;  /* live sets, oldest first */
    int in_msg;
    uint64_t cur_size, cur_off; uint32_t cur_crc, cur_repaired; double cur_start;
    uint8_t *cur_buf;
    uint8_t *scratch;   /* symbol-sized scratch */
    struct tn_ec *ec;   /* FEC mode: the erasure code's context (ec.h) */
    /* congestion control (requester) */
    double pacer_due;   /* HPCC: when the pacer let the next packet go, < 0 none */
    double last_dep;    /* the last paced departure (smoothing, catchup_s); < 0 none */
    int dep_bound;      /* ... and catchup_s bound its successor (under a whole gap) */
    double rate_cap;    /* rate feedback, a cap over DCQCN's or HPCC's rate; < 0 none */
    double hpcc_rtt;    /* smallest RTT sample: HPCC's T unless configured; < 0 none */
    double last_rtt;    /* the latest RTT sample, < 0 none */
    uint64_t rtt_samples;
    double first_queue_s, first_cut_s;
    uint64_t max_queue, echo_accepted, echo_rejected[4], rate_changes;
    uint32_t n_log, log_head;
    double log_t[TN_RATE_LOG], log_v[TN_RATE_LOG];
    struct tn_hpcc *hp;
    struct tn_dcqcn *dc;
};

static uint32_t pow2_at_least(uint32_t n)
{
    uint32_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

static void apply_cc_rate(struct tn_qp *q, double now);

static void log_rate(struct tn_qp *q, double now, double rate)
{
    uint32_t i = (q->log_head + q->n_log) % TN_RATE_LOG;
    if (q->n_log == TN_RATE_LOG)
        q->log_head = (q->log_head + 1) % TN_RATE_LOG;
    else
        q->n_log++;
    q->log_t[i] = now;
    q->log_v[i] = rate;
    q->rate_changes++;
}

/* Python's float floor division (float_floor_div), so windows round as the reference's */
static double py_floordiv(double vx, double wx)
{
    double mod = fmod(vx, wx);
    double div = (vx - mod) / wx;
    if (mod != 0.0) {
        if ((wx < 0) != (mod < 0))
            div -= 1.0;
    }
    double fd;
    if (div != 0.0) {
        fd = floor(div);
        if (div - fd > 0.5)
            fd += 1.0;
    } else {
        fd = copysign(0.0, vx / wx);
    }
    return fd;
}

static double hpcc_T(const struct tn_qp *q)
{
    return tn_hpcc_base_rtt(&q->a.hpcc, q->hpcc_rtt < 0 ? NAN : q->hpcc_rtt);
}

static void hpcc_window(struct tn_qp *q)
{
    if (!q->hp || !q->a.hpcc_window)
        return;
    double wire = q->a.mtu + TN_BTH + TN_ICRC + TN_WIRE_OVERHEAD;
    double w = -py_floordiv(-tn_hpcc_window_bytes(q->hp, hpcc_T(q)), wire);
    if (w < 1)
        w = 1;
    if (w > q->a.window_pkts)
        w = q->a.window_pkts;
    q->win_pkts = (uint32_t)w;
}

uint32_t tn_qp_qpn(const struct tn_qp *q) { return q->a.qpn; }
uint32_t tn_qp_peer_qpn(const struct tn_qp *q) { return q->a.peer_qpn; }
uint32_t tn_qp_peer_ip(const struct tn_qp *q) { return q->a.peer_ip; }
int tn_qp_role(const struct tn_qp *q) { return (int)q->a.role; }
uint32_t tn_qp_tos(const struct tn_qp *q) { return q->tos; }

static int check_fec(uint32_t k, uint32_t m, char *err, size_t n, uint32_t qpn)
{
    if (k < 1 || k > 128) {
        seterr(err, n, "QP %u: fec_k=%u outside 1..128", qpn, k);
        return -1;
    }
    if (m > 16) {
        seterr(err, n, "QP %u: fec_m=%u outside 0..16", qpn, m);
        return -1;
    }
    return 0;
}

struct tn_qp *tn_qp_new(const struct tn_qp_attr *a, uint32_t local_ip, uint16_t sport,
                        uint16_t dport, double now, char *err, size_t errlen)
{
    if (a->qpn < 1 || a->qpn > TN_PSN_MASK || a->peer_qpn < 1 || a->peer_qpn > TN_PSN_MASK) {
        seterr(err, errlen, "QP config: qpn=%u / peer_qpn=%u outside 1..16777215", a->qpn,
               a->peer_qpn);
        return NULL;
    }
    if (a->mtu < 64 || a->mtu > 9000) {
        seterr(err, errlen, "QP %u: mtu=%u outside 64..9000 bytes", a->qpn, a->mtu);
        return NULL;
    }
    if (a->window_pkts < 1 || a->window_pkts > 8000) {
        seterr(err, errlen, "QP %u: window_pkts=%u outside 1..8000", a->qpn, a->window_pkts);
        return NULL;
    }
    if (a->mode > TN_MODE_AUTO || a->role > TN_RESPONDER || a->dscp > 63) {
        seterr(err, errlen, "QP %u: mode=%u role=%u dscp=%u invalid", a->qpn, a->mode,
               a->role, a->dscp);
        return NULL;
    }
    if (check_fec(a->fec_k, a->fec_m, err, errlen, a->qpn))
        return NULL;
    if (!(a->rate_bps >= MIN_RATE && a->rate_bps <= MAX_RATE)) {
        seterr(err, errlen, "token bucket: rate_bps=%g outside 1000..4e+11", a->rate_bps);
        return NULL;
    }
    struct tn_qp *q = calloc(1, sizeof *q);
    if (!q) {
        seterr(err, errlen, "out of memory");
        return NULL;
    }
    q->a = *a;
    if (a->role == TN_RESPONDER && a->mode == TN_MODE_AUTO)
        q->a.mode = TN_MODE_FEC;  /* the same responder (traffic/responder.py) */
    q->local_ip = local_ip;
    q->sport = sport;
    q->dport = dport;
    q->tos = (a->dscp << 2) | 0x02;
    q->bk.burst_s = a->burst_s;
    q->bk.min_burst = a->min_burst_bytes;
    if (a->cc == TN_CC_HPCC) {  /* ns-3's per-packet pacing (traffic/requester.py) */
        double full = a->mtu + TN_BTH + TN_RETH + TN_ICRC + TN_WIRE_OVERHEAD;
        q->bk.burst_s = 0.0;
        q->bk.min_burst = (double)(int64_t)(a->hpcc_pacing_burst_pkts * full);
    }
    q->bk.last_t = now;
    q->bk.rate = a->rate_bps;
    bk_set_rate(&q->bk, a->rate_bps, now);
    q->bk.tokens = q->bk.depth;
    uint32_t cap = pow2_at_least(a->window_pkts + 1);
    q->slots = calloc(cap, sizeof *q->slots);
    q->smask = cap - 1;
    /* mode auto: an interleaved group closes up to 16 blocks at once, and a block's
     * members are up to a group (512 packets) apart */
    uint32_t bcap = a->mode == TN_MODE_AUTO ? pow2_at_least(a->window_pkts + 1 + 1024) : cap;
    q->blocks = calloc(bcap, sizeof *q->blocks);
    q->bmask = bcap - 1;
    q->mcap = 64;
    q->msgs = calloc(q->mcap, sizeof *q->msgs);
    q->srtt = -1; q->min_rtt = -1; q->rtt_cand = -1; q->rto_deadline = -1;
    q->rto = a->rto_initial_s > a->rto_min_s ? a->rto_initial_s : a->rto_min_s;
    q->win_pkts = a->window_pkts;
    q->va = 0x10000;
    q->pacer_due = -1; q->rate_cap = -1; q->hpcc_rtt = -1; q->ack_fresh_tx = -1;
    q->last_rtt = -1; q->last_dep = -1;
    q->first_queue_s = -1; q->first_cut_s = -1;
    q->nak_for = -1;
    q->ooo_hi = -1;
    uint32_t ocap = pow2_at_least(2 * a->window_pkts + 1);
    q->omask = ocap - 1;
    q->scratch = malloc(TN_SYM_HDR + a->mtu + 64);
    int ok = q->slots && q->blocks && q->msgs && q->scratch;
    q->est_last = -2;
    if (a->mode == TN_MODE_FEC || a->mode == TN_MODE_AUTO)
        ok = ok && (q->ec = tn_ec_new()) != NULL;
    if (ok && a->role == TN_REQUESTER && a->cc == TN_CC_DCQCN) {
        q->dc = calloc(1, sizeof *q->dc);
        if (!q->dc || tn_dcqcn_init(q->dc, &a->dcqcn, a->rate_bps, a->mtu, now)) {
            seterr(err, errlen, "QP %u: DCQCN settings out of range", a->qpn);
            tn_qp_free(q);
            return NULL;
        }
    }
    if (ok && a->role == TN_REQUESTER && a->cc == TN_CC_HPCC) {
        q->hp = calloc(1, sizeof *q->hp);
        if (!q->hp || tn_hpcc_init(q->hp, &a->hpcc, a->rate_bps)) {
            seterr(err, errlen, "QP %u: HPCC settings out of range", a->qpn);
            tn_qp_free(q);
            return NULL;
        }
    }
    if (a->role == TN_RESPONDER) {
        q->ooo = calloc(ocap, sizeof *q->ooo);
        ok = ok && q->ooo;
        if (q->a.mode == TN_MODE_FEC) {
            /* every symbol from KEEP_SYMBOLS behind the expected PSN to the farthest
             * accepted ahead of it (FAR_WINDOWS windows) has a slot of its own; a
             * slot's buffer is allocated when first used */
            q->ymask = pow2_at_least(KEEP_SYMBOLS + FAR_WINDOWS * a->window_pkts + 1) - 1;
            q->syms = calloc(q->ymask + 1, sizeof *q->syms);
            ok = ok && q->syms;
            for (uint32_t i = 0; ok && i <= q->ymask; i++)
                q->syms[i].seq = -1;
        }
    } else {
        q->open_seqs = calloc(128, sizeof *q->open_seqs);
        q->open_syms = calloc(128, sizeof *q->open_syms);
        q->open_lens = calloc(128, sizeof *q->open_lens);
        ok = ok && q->open_seqs && q->open_syms && q->open_lens;
        for (int i = 0; ok && i < 128 && a->mode == TN_MODE_FEC; i++)
            ok = (q->open_syms[i] = malloc(TN_SYM_HDR + a->mtu)) != NULL;
        if (a->mode == TN_MODE_AUTO) {  /* symbol buffers allocated when first used */
            q->g_syms = calloc(TN_MAX_GROUP, sizeof *q->g_syms);
            q->g_lens = calloc(TN_MAX_GROUP, sizeof *q->g_lens);
            ok = ok && q->g_syms && q->g_lens;
        }
    }
    if (!ok) {
        tn_qp_free(q);
        seterr(err, errlen, "QP %u: out of memory", a->qpn);
        return NULL;
    }
    if (q->hp)
        hpcc_window(q);  /* HPCC's window bounds the first round trip too */
    log_rate(q, now, a->rate_bps);
    q->rate_changes = 0;
    if (q->hp || q->dc)
        apply_cc_rate(q, now);  /* an algorithm may start below the line rate */
    return q;
}

void tn_qp_free(struct tn_qp *q)
{
    if (!q)
        return;
    if (q->msgs)
        for (int64_t i = q->m_head; i < q->m_tail; i++)
            free(q->msgs[i & (q->mcap - 1)].groups);
    free(q->slots); free(q->blocks); free(q->msgs); free(q->scratch); free(q->retx_acked);
    while (q->repair_q.len)
        free(dq_pop(&q->repair_q).ptr);
    free(q->retx_q.v); free(q->repair_q.v); free(q->tx_order.v);
    if (q->ooo)
        for (uint32_t i = 0; i <= q->omask; i++)
            free(q->ooo[i].data);
    free(q->ooo);
    if (q->syms)
        for (uint32_t i = 0; i <= q->ymask; i++)
            free(q->syms[i].data);
    free(q->syms);
    if (q->open_syms)
        for (int i = 0; i < 128; i++)
            free(q->open_syms[i]);
    free(q->open_syms); free(q->open_seqs); free(q->open_lens);
    if (q->g_syms)
        for (int i = 0; i < TN_MAX_GROUP; i++)
            free(q->g_syms[i]);
    free(q->g_syms); free(q->g_lens);
    for (int i = 0; i < MAX_REPAIR_SETS; i++)
        for (int j = 0; j < 16; j++)
            free(q->rsets[i].rep[j]);
    free(q->cur_buf);
    tn_ec_free(q->ec);
    free(q->hp);
    free(q->dc);
    free(q);
}

/* -- requester ------------------------------------------------------------------------ */
static inline struct tmsg *msg_at(struct tn_qp *q, int64_t no) { return &q->msgs[no & (q->mcap - 1)]; }

static inline struct tpkt *pkt_get(struct tn_qp *q, int64_t seq)
{
    struct tpkt *p = &q->slots[seq & q->smask];
    return (p->valid && p->seq == seq) ? p : NULL;
}

/* a plan's groups for a message of npk packets: 0, or -1 with the reason in err */
static int check_plan(const struct tn_qp *q, const struct tn_group *g, uint32_t n,
                      uint32_t npk, char *err, size_t errlen)
{
    if (n && q->a.mode != TN_MODE_AUTO) {
        seterr(err, errlen, "QP %u: a message plan needs mode auto", q->a.qpn);
        return -1;
    }
    uint64_t end = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t per = g[i].blocks ? (g[i].count + g[i].blocks - 1) / g[i].blocks : 0;
        if (g[i].count < 1 || g[i].count > TN_MAX_GROUP || g[i].blocks < 1 ||
            g[i].blocks > TN_MAX_DEPTH || per > 128 || g[i].m > 16 || g[i].first < end ||
            (uint64_t)g[i].first + g[i].count > npk) {
            seterr(err, errlen, "QP %u: plan group %u (first %u, count %u, blocks %u, m %u) "
                   "outside the message's %u packets, after the group before, count 1..%d, "
                   "blocks 1..%d, <= 128 packets a block, m 0..16", q->a.qpn, i, g[i].first,
                   g[i].count, g[i].blocks, g[i].m, npk, TN_MAX_GROUP, TN_MAX_DEPTH);
            return -1;
        }
        end = (uint64_t)g[i].first + g[i].count;
    }
    return 0;
}

int tn_qp_post(struct tn_qp *q, int op, const void *buf, uint64_t len, uint64_t wr_id,
               const struct tn_group *groups, uint32_t n_groups, double now, char *err,
               size_t errlen)
{
    if (q->a.role != TN_REQUESTER) {
        seterr(err, errlen, "QP %u is a responder: it cannot post", q->a.qpn);
        return -1;
    }
    if (len == 0 || len > 0xFFFFFFFFull) {
        seterr(err, errlen, "QP %u: an RDMA WRITE needs 1..2^32-1 bytes, not %llu", q->a.qpn,
               (unsigned long long)len);
        return -1;
    }
    if (op == OP_SEND_ONLY && len > q->a.mtu) {
        seterr(err, errlen, "QP %u: a SEND carries at most one MTU (%u bytes)", q->a.qpn,
               q->a.mtu);
        return -1;
    }
    if (check_plan(q, groups, n_groups, (uint32_t)((len + q->a.mtu - 1) / q->a.mtu), err,
                   errlen))
        return -1;
    struct tn_group *plan = NULL;
    if (n_groups) {
        plan = malloc(sizeof *plan * n_groups);
        if (!plan) {
            seterr(err, errlen, "out of memory");
            return -1;
        }
        memcpy(plan, groups, sizeof *plan * n_groups);
    }
    if (q->m_tail - q->m_head == q->mcap) {
        uint32_t nc = q->mcap * 2;
        struct tmsg *nm = calloc(nc, sizeof *nm);
        if (!nm) {
            seterr(err, errlen, "out of memory");
            free(plan);
            return -1;
        }
        for (int64_t i = q->m_head; i < q->m_tail; i++)
            nm[i & (nc - 1)] = *msg_at(q, i);
        free(q->msgs);
        q->msgs = nm; q->mcap = nc;
    }
    struct tmsg *m = msg_at(q, q->m_tail++);
    memset(m, 0, sizeof *m);
    m->wr_id = wr_id;
    m->msg_id = ++q->msg_id;
    m->size = len;
    m->data = buf;
    m->posted_s = now;
    m->crc = tn_crc32(0, buf, len);
    m->op = op;
    m->groups = plan;
    m->n_groups = n_groups;
    m->npk = (uint32_t)((len + q->a.mtu - 1) / q->a.mtu);
    m->first_seq = q->next_seq;
    q->next_seq += m->npk;
    m->last_seq = q->next_seq - 1;
    m->va = q->va;
    q->va += (len + 4095) & ~4095ull;
    return 0;
}

/* build data packet seq's bytes into out (returns its length) */
static uint32_t build_data(struct tn_qp *q, const struct tpkt *p, uint8_t *out)
{
    struct tmsg *m = msg_at(q, p->msg_no);
    uint32_t psn = (q->a.start_psn + (uint32_t)p->seq) & TN_PSN_MASK;
    tn_pack_bth(out, p->op, q->a.peer_qpn, psn, op_is_last(p->op), 0);
    uint32_t off = TN_BTH;
    if (op_has_reth(p->op)) {
        put64(out + off, m->va); put32(out + off + 8, q->a.qpn);
        put32(out + off + 12, (uint32_t)m->size);
        off += TN_RETH;
    }
    memcpy(out + off, m->data + p->off, p->len);
    uint32_t n = off + p->len + TN_ICRC;
    tn_icrc_finish(out, n, q->local_ip, q->a.peer_ip, q->sport, q->dport);
    return n;
}

static uint32_t data_wire_len(const struct tpkt *p)
{
    return TN_BTH + (op_has_reth(p->op) ? TN_RETH : 0) + p->len + TN_ICRC;
}

static uint32_t encode_symbol(const struct tn_qp *q, const struct tpkt *p, uint8_t *sym)
{
    const struct tmsg *m = &q->msgs[p->msg_no & (q->mcap - 1)];
    sym[0] = p->op; sym[1] = op_has_reth(p->op) ? 1 : 0; put16(sym + 2, p->len);
    if (op_has_reth(p->op)) {
        put64(sym + 4, m->va); put32(sym + 12, q->a.qpn); put32(sym + 16, (uint32_t)m->size);
    } else {
        memset(sym + 4, 0, TN_RETH);
    }
    memcpy(sym + TN_SYM_HDR, m->data + p->off, p->len);
    return TN_SYM_HDR + p->len;
}

static void close_block(struct tn_qp *q)
{
    uint32_t n = q->n_open;
    if (!n)
        return;
    q->n_open = 0;
    uint32_t m = q->a.fec_m;
    if (m == 0)
        return;
    int64_t bid = ++q->block_id;
    uint32_t slen = 0;
    for (uint32_t i = 0; i < n; i++)
        if (q->open_lens[i] > slen)
            slen = q->open_lens[i];
    for (uint32_t i = 0; i < n; i++)
        memset(q->open_syms[i] + q->open_lens[i], 0, slen - q->open_lens[i]);
    int64_t base = q->open_seqs[0];
    struct tblock *b = &q->blocks[bid & q->bmask];
    b->bid = bid; b->base = base; b->last = q->open_seqs[n - 1]; b->count = n;
    b->stride = 1; b->m = m; b->repair_tx = -1; b->live = 1;
    for (uint32_t i = 0; i < n; i++) {
        struct tpkt *p = pkt_get(q, q->open_seqs[i]);
        if (p)
            p->block = bid;
    }
    uint8_t *rep[16], *bufs[16];
    uint32_t plen = TN_BTH + TN_FEC_HDR + slen + TN_ICRC;
    for (uint32_t j = 0; j < m; j++) {  /* [4-byte length][UDP payload] */
        bufs[j] = malloc(4 + plen);
        if (!bufs[j]) {
            while (j--)
                free(bufs[j]);
            return;  /* no repair for this block: selective repeat recovers it */
        }
        rep[j] = bufs[j] + 4 + TN_BTH + TN_FEC_HDR;
    }
    if (tn_ec_encode(q->ec, (int)n, (int)m, slen, (const uint8_t *const *)q->open_syms,
                     rep) < 0) {
        for (uint32_t j = 0; j < m; j++)
            free(bufs[j]);
        return;  /* no repair for this block: selective repeat recovers it */
    }
    uint32_t psn = (q->a.start_psn + (uint32_t)base) & TN_PSN_MASK;
    for (uint32_t j = 0; j < m; j++) {
        uint8_t *r = bufs[j];
        uint8_t *buf = r + 4;
        put32(r, plen);
        tn_pack_bth(buf, OP_FEC_REPAIR, q->a.peer_qpn, psn, 0, 0);
        uint8_t *f = buf + TN_BTH;
        f[0] = (uint8_t)q->a.fec_k; f[1] = (uint8_t)m; f[2] = (uint8_t)j; f[3] = 0;
        put16(f + 4, slen); put16(f + 6, n);
        tn_icrc_finish(buf, plen, q->local_ip, q->a.peer_ip, q->sport, q->dport);
        dq_push(&q->repair_q, bid, 0, r);
    }
}

static void add_to_block(struct tn_qp *q, struct tpkt *p)
{
    uint32_t i = q->n_open++;
    q->open_seqs[i] = p->seq;
    q->open_lens[i] = encode_symbol(q, p, q->open_syms[i]);
    if (q->n_open >= q->a.fec_k)
        close_block(q);
}

/* -- mode auto: plan groups (traffic/requester.py _add_to_group, _close_group,
 * _split_group) -------------------------------------------------------------------- */
static void close_group(struct tn_qp *q)
{
    struct tgroup *g = &q->cg;
    uint32_t nb = g->blocks, m = g->m, added = g->added;
    g->live = 0;
    int64_t bids[TN_MAX_DEPTH];
    uint8_t *bufs[TN_MAX_DEPTH][16];
    memset(bufs, 0, sizeof bufs);
    for (uint32_t j = 0; j < nb; j++) {
        bids[j] = -1;
        uint32_t n = j < added ? (added - 1 - j) / nb + 1 : 0;
        if (!n || m == 0)
            continue;
        int64_t bid = bids[j] = ++q->block_id;
        const uint8_t *syms[128];
        uint32_t slen = 0;
        for (uint32_t i = 0; i < n; i++)
            if (q->g_lens[j + i * nb] > slen)
                slen = q->g_lens[j + i * nb];
        for (uint32_t i = 0; i < n; i++) {
            uint32_t pos = j + i * nb;
            memset(q->g_syms[pos] + q->g_lens[pos], 0, slen - q->g_lens[pos]);
            syms[i] = q->g_syms[pos];
            struct tpkt *p = pkt_get(q, g->first_seq + pos);
            if (p)
                p->block = bid;
        }
        struct tblock *b = &q->blocks[bid & q->bmask];
        b->bid = bid; b->base = g->first_seq + j; b->last = g->first_seq + j + (n - 1) * nb;
        b->count = n; b->stride = nb; b->m = m; b->repair_tx = -1; b->live = 1;
        uint8_t *rep[16];
        uint32_t plen = TN_BTH + TN_FEC_HDR + slen + TN_ICRC;
        uint32_t r;
        for (r = 0; r < m; r++) {  /* [4-byte length][UDP payload] */
            if (!(bufs[j][r] = malloc(4 + plen)))
                break;
            rep[r] = bufs[j][r] + 4 + TN_BTH + TN_FEC_HDR;
        }
        if (r < m || tn_ec_encode(q->ec, (int)n, (int)m, slen, syms, rep) < 0) {
            for (r = 0; r < m; r++) {  /* no repair for this block: selective repeat */
                free(bufs[j][r]);
                bufs[j][r] = NULL;
            }
            continue;
        }
        uint32_t psn = (q->a.start_psn + (uint32_t)b->base) & TN_PSN_MASK;
        for (r = 0; r < m; r++) {
            uint8_t *buf = bufs[j][r] + 4;
            put32(bufs[j][r], plen);
            tn_pack_bth(buf, OP_FEC_REPAIR, q->a.peer_qpn, psn, 0, 0);
            uint8_t *f = buf + TN_BTH;
            f[0] = (uint8_t)(n < 255 ? n : 255); f[1] = (uint8_t)m; f[2] = (uint8_t)r;
            f[3] = (uint8_t)(nb > 1 ? nb : 0);
            put16(f + 4, slen); put16(f + 6, n);
            tn_icrc_finish(buf, plen, q->local_ip, q->a.peer_ip, q->sport, q->dport);
        }
    }
    /* traffic.recovery.repair_order: position added + t carries a repair of block
     * (added + t) mod blocks */
    for (uint32_t t = 0; t < nb * m; t++) {
        uint32_t j = (added + t) % nb, r = t / nb;
        if (bufs[j][r])
            dq_push(&q->repair_q, bids[j], 0, bufs[j][r]);
    }
}

/* a new data packet at index idx of message m: into the group being sent, or the
 * first of a group of the message's plan */
static void add_to_group(struct tn_qp *q, struct tpkt *p, struct tmsg *m, uint32_t idx)
{
    struct tgroup *g = &q->cg;
    if (!(g->live && p->seq >= g->first_seq && p->seq < g->first_seq + g->count)) {
        while (m->gi < m->n_groups && m->groups[m->gi].first + m->groups[m->gi].count <= idx)
            m->gi++;
        if (m->gi >= m->n_groups || m->groups[m->gi].first > idx) {
            q->est_sent++;  /* plain selective repeat */
            return;
        }
        const struct tn_group *pg = &m->groups[m->gi];
        *g = (struct tgroup){.first_seq = (int64_t)m->first_seq + pg->first, .count = pg->count,
                             .blocks = pg->blocks, .m = pg->m, .live = 1};
    }
    uint32_t pos = (uint32_t)(p->seq - g->first_seq);
    if (!q->g_syms[pos] && !(q->g_syms[pos] = malloc(TN_SYM_HDR + q->a.mtu))) {
        g->live = 0;  /* out of memory: the rest of the group is selective repeat */
        return;
    }
    q->g_lens[pos] = encode_symbol(q, p, q->g_syms[pos]);
    p->grp = 1;
    if (++g->added == g->count)
        close_group(q);
}

static uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

/* window-blocked inside a group: close what was sent of it and code the rest as a
 * group of its own, each part with its share of the repairs (at least one a block) */
static int split_group(struct tn_qp *q)
{
    struct tgroup *g = &q->cg;
    if (!g->live || g->added == 0 || g->added >= g->count)
        return 0;
    uint32_t left = g->count - g->added;
    struct tgroup rest = {.first_seq = q->sent_up_to, .count = left,
                          .blocks = g->blocks < left ? g->blocks : left,
                          .m = ceil_div(g->m * left, g->count), .live = 1};
    if (rest.blocks < 1)
        rest.blocks = 1;
    if (rest.m < 1)
        rest.m = 1;
    uint32_t gm = ceil_div(g->m * g->added, g->count);
    g->m = gm < 1 ? 1 : gm;
    g->count = g->added;
    close_group(q);
    q->cg = rest;
    return 1;
}

static double rto_value(const struct tn_qp *q)
{
    if (q->srtt < 0)
        return q->a.rto_initial_s > q->a.rto_min_s ? q->a.rto_initial_s : q->a.rto_min_s;
    double var = q->rttvar > q->srtt / 8 ? q->rttvar : q->srtt / 8;
    double v = q->srtt + 4 * var;
    if (v < q->rto_floor)
        v = q->rto_floor;
    if (v < q->a.rto_min_s)
        v = q->a.rto_min_s;
    return v < q->a.rto_max_s ? v : q->a.rto_max_s;
}

static void go_back(struct tn_qp *q, int64_t seq)
{
    q->retx_q.len = 0;
    for (int64_t s = seq; s < q->sent_up_to; s++) {
        struct tpkt *p = pkt_get(q, s);
        if (p) {
            p->queued = 1;
            dq_push(&q->retx_q, s, 0, NULL);
        }
    }
}

/* A timeout's resend: go-back-N from the oldest unacknowledged packet, else that
 * packet alone (traffic/requester.py _resend_oldest). */
static void resend_oldest(struct tn_qp *q)
{
    if (q->a.mode == TN_MODE_GBN) {
        go_back(q, q->una);
        q->c.timeouts++;
    } else {
        for (int64_t s = q->una; s < q->sent_up_to; s++) {
            struct tpkt *p = pkt_get(q, s);
            if (!p || p->acked)
                continue;
            if (!p->queued) {
                p->queued = p->rto_retx = 1;
                dq_pushleft(&q->retx_q, s, 0, NULL);
                q->c.timeouts++;
            }
            break;
        }
    }
}

/* At a timeout, before the timer backs off again: if it already fired since the last
 * progress and an RTT sample exists, every other unacknowledged packet sent at least
 * a base timeout ago goes too (traffic/requester.py _resend_overdue says why). */
static void resend_overdue(struct tn_qp *q, double now)
{
    double base = rto_value(q);
    if (q->a.mode == TN_MODE_GBN || q->srtt < 0 || q->rto <= base)
        return;  /* go-back-N resent the window; no RTT sample; the first timeout */
    for (int64_t s = q->una; s < q->sent_up_to; s++) {
        struct tpkt *p = pkt_get(q, s);
        if (!p || p->acked || p->queued || now - p->sent_s < base)
            continue;
        p->queued = 1;
        dq_push(&q->retx_q, s, 0, NULL);
    }
}

static void check_rto(struct tn_qp *q, double now)
{
    if (q->rto_deadline < 0 || now < q->rto_deadline)
        return;
    if (q->sent_up_to == q->una) {
        q->rto_deadline = -1;
        return;
    }
    resend_oldest(q);
    resend_overdue(q, now);
    if (++q->rtos_unsampled >= 2)
        q->min_rtt = -1;
    q->rto = q->rto * 2 < q->a.rto_max_s ? q->rto * 2 : q->a.rto_max_s;
    q->rto_deadline = now + q->rto;
}

/* The controller moved the QP's route (control API "path_changed"): the timeout
 * goes back to its base value; a QP whose timer fired since its last progress (it
 * was stalled on the old path) resends now as its timeout would have, without the
 * doubling.  Returns 1 when it resent.  (traffic/requester.py: path_changed.) */
int tn_qp_path_changed(struct tn_qp *q, double now)
{
    double base = rto_value(q);
    int outstanding = q->sent_up_to > q->una;
    int stalled = outstanding && q->rto > base;
    if (stalled)
        resend_oldest(q);
    q->rto = base;
    if (!outstanding)
        q->rto_deadline = -1;
    else if (stalled || q->rto_deadline < 0 || q->rto_deadline > now + base)
        q->rto_deadline = now + base;
    return stalled;
}

/* pace at DCQCN's (or HPCC's) rate, capped by rate feedback */
static void apply_cc_rate(struct tn_qp *q, double now)
{
    double rate;
    if (q->dc) {
        rate = tn_dcqcn_rate_bps(q->dc);
    } else {
        rate = q->hp->rate_bps > MIN_RATE ? q->hp->rate_bps : MIN_RATE;
    }
    if (q->rate_cap >= 0 && q->rate_cap < rate)
        rate = q->rate_cap;
    if (rate != q->a.rate_bps) {
        bk_set_rate(&q->bk, rate, now);
        q->a.rate_bps = rate;
        log_rate(q, now, rate);
    }
}

static double poll_inner(struct tn_qp *q, double now, struct tn_out *out, int budget);

double tn_qp_poll(struct tn_qp *q, double now, struct tn_out *out, int budget,
                  struct tn_cq_sink *cq, int timers)
{
    (void)cq;
    q->timers = timers;
    if (q->a.role != TN_REQUESTER)
        return -1;
    if (!q->dc)
        return poll_inner(q, now, out, budget);
    if (tn_dcqcn_tick(q->dc, now))
        apply_cc_rate(q, now);
    uint64_t sent0 = q->c.tx_bytes;
    double wake = poll_inner(q, now, out, budget);
    tn_dcqcn_on_sent(q->dc, q->c.tx_bytes - sent0);
    return wake;
}

double tn_qp_cc_wake(const struct tn_qp *q)
{
    if (!q->dc || q->pacer_due < 0)
        return -1;
    return (double)q->dc->due_ns * 1e-9;
}

static double poll_inner(struct tn_qp *q, double now, struct tn_out *out, int budget)
{
    if (q->timers)  /* not while packets (maybe ACKs) are left unread */
        check_rto(q, now);
    int sent = 0;
    while (sent < budget && out->n < out->cap) {
        int kind;
        struct tpkt *p = NULL;
        uint32_t len;
        if (q->retx_q.len) {
            int64_t seq = dq_front(&q->retx_q)->a;
            p = pkt_get(q, seq);
            if (!p || p->acked) {
                dq_pop(&q->retx_q);
                if (p)
                    p->queued = 0;
                continue;
            }
            kind = 0;
            len = data_wire_len(p);
        } else if (q->repair_q.len) {
            kind = 1;
            len = get32(dq_front(&q->repair_q)->ptr);
        } else if (q->sent_up_to < q->next_seq &&
                   q->sent_up_to - q->una < (int64_t)q->win_pkts) {
            kind = 2;
            struct tmsg *m = msg_at(q, q->new_msg);
            uint32_t off = (uint32_t)q->new_idx * q->a.mtu;
            uint32_t l = (uint32_t)(m->size - off < q->a.mtu ? m->size - off : q->a.mtu);
            len = TN_BTH + ((q->new_idx == 0 && m->op != OP_SEND_ONLY) ? TN_RETH : 0) + l +
                  TN_ICRC;
        } else {
            /* window-blocked with at least half a block open (traffic/requester.py) */
            if (q->sent_up_to < q->next_seq && q->a.mode == TN_MODE_FEC &&
                q->n_open && 2 * q->n_open >= q->a.fec_k) {
                close_block(q);
                continue;
            }
            if (q->sent_up_to < q->next_seq && q->a.mode == TN_MODE_AUTO && split_group(q))
                continue;  /* the same, for an interleaved group */
            q->pacer_due = -1;  /* nothing to send: idle time earns nothing */
            break;
        }
        double wire = len + TN_WIRE_OVERHEAD;
        double gap = wire * 8 / q->bk.rate;
        int smooth = q->a.catchup_s > 0 && gap >= TN_SMOOTH_MIN_GAP_S;
        if (smooth && q->last_dep >= 0) {
            double c = q->a.catchup_s < gap ? q->a.catchup_s : gap;
            double earliest = q->last_dep + gap - c;
            if (now < earliest) {
                q->pacer_due = earliest;
                return earliest;
            }
        }
        double due = q->pacer_due;
        if (due >= 0 && due < now && q->hp) {
            /* ns-3's NIC: the next packet goes size / R after this one was due; a late
             * wake-up is charged at the due time (traffic/requester.py) */
            q->pacer_due = -1;
            double at = due + 1e-6 < now ? due + 1e-6 : now;
            if (!bk_take(&q->bk, wire, at) && !bk_take(&q->bk, wire, now)) {
                q->pacer_due = now + bk_wait(&q->bk, wire);
                return q->pacer_due;
            }
        } else if (!bk_take(&q->bk, wire, now)) {
            q->pacer_due = now + bk_wait(&q->bk, wire);
            return q->pacer_due;
        }
        if (smooth) {
            q->last_dep = now;
            q->dep_bound = q->a.catchup_s < gap;
        }
        int64_t tx = ++q->tx_counter;
        q->c.tx_pkts++;
        q->c.tx_bytes += (uint64_t)wire;
        uint8_t *dst = out->bufs + (size_t)out->n * TN_MAX_PKT;
        if (kind == 0) {
            dq_pop(&q->retx_q);
            p->queued = 0;
            p->retx++;
            p->prev_tx = p->last_tx;
            p->last_tx = tx;
            p->sent_s = now;
            q->c.retx_pkts++;
            q->c.retx_bytes += (uint64_t)wire;
            msg_at(q, p->msg_no)->retx++;
            if (q->a.mode != TN_MODE_GBN)
                dq_push(&q->tx_order, tx, p->seq, NULL);
            out->lens[out->n++] = build_data(q, p, dst);
        } else if (kind == 1) {
            struct pair r = dq_pop(&q->repair_q);
            struct tblock *b = &q->blocks[r.a & q->bmask];
            if (b->live && b->bid == r.a)
                b->repair_tx = tx;
            q->c.repair_pkts++;
            memcpy(dst, (uint8_t *)r.ptr + 4, len);
            out->lens[out->n++] = len;
            free(r.ptr);
        } else {
            struct tmsg *m = msg_at(q, q->new_msg);
            int64_t seq = q->sent_up_to;
            p = &q->slots[seq & q->smask];
            memset(p, 0, sizeof *p);
            p->seq = seq; p->valid = 1; p->msg_no = q->new_msg; p->block = -1;
            p->off = (uint32_t)q->new_idx * q->a.mtu;
            p->len = (uint32_t)(m->size - p->off < q->a.mtu ? m->size - p->off : q->a.mtu);
            if (m->op == OP_SEND_ONLY)
                p->op = OP_SEND_ONLY;
            else if (m->npk == 1)
                p->op = OP_WRITE_ONLY;
            else if (q->new_idx == 0)
                p->op = OP_WRITE_FIRST;
            else if (q->new_idx == m->npk - 1)
                p->op = OP_WRITE_LAST;
            else
                p->op = OP_WRITE_MIDDLE;
            p->last_tx = p->first_tx = tx; p->prev_tx = -1; p->sent_s = p->first_sent_s = now;
            uint32_t idx = (uint32_t)q->new_idx;
            if (++q->new_idx == m->npk) {
                q->new_idx = 0;
                q->new_msg++;
            }
            q->sent_up_to = seq + 1;
            q->c.tx_data_pkts++;
            if (q->a.mode != TN_MODE_GBN)
                dq_push(&q->tx_order, tx, seq, NULL);
            out->lens[out->n++] = build_data(q, p, dst);
            if (q->a.mode == TN_MODE_FEC && q->a.fec_m > 0) {
                add_to_block(q, p);
                if (q->sent_up_to == q->next_seq)
                    close_block(q);
            } else if (q->a.mode == TN_MODE_AUTO) {
                add_to_group(q, p, m, idx);
            }
        }
        sent++;
        if (q->rto_deadline < 0)
            q->rto_deadline = now + q->rto;
    }
    if (sent >= budget || out->n >= out->cap)
        return now;
    return q->sent_up_to > q->una ? q->rto_deadline : -1;
}

int tn_qp_wants_wire_time(const struct tn_qp *q) { return q->last_dep >= 0 && q->dep_bound; }

double tn_qp_wire_departure(struct tn_qp *q, double t)
{
    /* later than the engine's read only (a stepped wall clock is left out) */
    if (!(q->last_dep >= 0 && t > q->last_dep && t < q->last_dep + 1e-3))
        return 0;
    double d = t - q->last_dep;
    q->last_dep = t;
    return d;
}

static void rtt_sample(struct tn_qp *q, double rtt)
{
    if (rtt <= 0)
        return;
    if (q->hpcc_rtt < 0 || rtt < q->hpcc_rtt)
        q->hpcc_rtt = rtt;
    q->last_rtt = rtt;
    q->rtt_samples++;
    q->rtos_unsampled = 0;
    q->rto_floor *= 0.99;
    if (q->min_rtt < 0 || rtt < q->min_rtt)
        q->min_rtt = rtt;
    if (q->srtt < 0) {
        q->srtt = rtt;
        q->rttvar = rtt / 2;
    } else {
        q->rttvar = 0.75 * q->rttvar + 0.25 * fabs(q->srtt - rtt);
        q->srtt = 0.875 * q->srtt + 0.125 * rtt;
    }
}

static void mark_acked(struct tn_qp *q, int64_t seq, double now)
{
    struct tpkt *p = pkt_get(q, seq);
    if (!p || p->acked || p->last_tx < 0)
        return;
    p->acked = 1;
    q->progress = 1;
    q->c.acked_bytes += data_wire_len(p) - TN_ICRC;
    int64_t tx = p->last_tx;
    if (p->retx && q->min_rtt >= 0 && now - p->sent_s < 0.8 * q->min_rtt) {
        tx = p->prev_tx;
    } else if (p->retx) {  /* decided once the whole ACK is read (settle_retx_acks) */
        if (q->n_retx_acked == q->cap_retx_acked) {
            uint32_t nc = q->cap_retx_acked ? q->cap_retx_acked * 2 : 64;
            int64_t *nv = realloc(q->retx_acked, sizeof *nv * nc);
            if (nv) {
                q->retx_acked = nv;
                q->cap_retx_acked = nc;
            }
        }
        if (q->n_retx_acked < q->cap_retx_acked)
            q->retx_acked[q->n_retx_acked++] = seq;
        tx = -1;
    } else if (tx > q->ack_fresh_tx) {
        q->ack_fresh_tx = tx;
    }
    if (tx > q->hi_tx)
        q->hi_tx = tx;
    if (p->retx == 0) {
        double rtt = now - p->sent_s;
        if (q->rtt_cand < 0 || rtt < q->rtt_cand)
            q->rtt_cand = rtt;
    }
}

/* traffic/requester.py _settle_retx_acks: which transmission of each retransmitted
 * packet this ACK acknowledged; a timeout for a packet the receiver had is spurious */
static void settle_retx_acks(struct tn_qp *q, double now)
{
    for (uint32_t i = 0; i < q->n_retx_acked; i++) {
        struct tpkt *p = &q->slots[q->retx_acked[i] & q->smask];
        if (p->seq != q->retx_acked[i])
            continue;  /* (its slot is reused only a window later) */
        int original = q->ack_fresh_tx > p->first_tx;
        int64_t tx = original ? p->first_tx : p->last_tx;
        if (tx > q->hi_tx)
            q->hi_tx = tx;
        if (original && p->rto_retx) {
            q->c.spurious_timeouts++;
            double f = 1.25 * (now - p->first_sent_s);
            if (f < q->rto_floor)
                f = q->rto_floor;
            q->rto_floor = f < q->a.rto_max_s ? f : q->a.rto_max_s;
        }
    }
    q->n_retx_acked = 0;
    q->ack_fresh_tx = -1;
}

static void ack_up_to(struct tn_qp *q, int64_t seq, double now, struct tn_cq_sink *cq)
{
    if (seq <= q->una)
        return;
    if (seq > q->sent_up_to)
        seq = q->sent_up_to;
    for (int64_t s = q->una; s < seq; s++) {
        struct tpkt *p = pkt_get(q, s);
        if (!p)
            continue;
        if (!p->acked)
            mark_acked(q, s, now);
        p->valid = 0;
        if (op_is_last(p->op)) {
            struct tmsg *m = msg_at(q, p->msg_no);
            q->c.msgs_done++;
            if (cq) {
                struct tn_wc wc = {.wr_id = m->wr_id, .msg_id = m->msg_id, .byte_len = m->size,
                                   .posted_s = m->posted_s, .done_s = now, .qpn = q->a.qpn,
                                   .kind = TN_WC_SEND_DONE, .crc32 = m->crc,
                                   .retx_pkts = m->retx};
                cq->push(cq->ctx, &wc);
            }
            while (q->m_head <= p->msg_no) {
                struct tmsg *done = msg_at(q, q->m_head++);
                free(done->groups);
                done->groups = NULL;
            }
        }
        if (p->block >= 0) {
            struct tblock *b = &q->blocks[p->block & q->bmask];
            if (b->live && b->bid == p->block && b->last == s)
                b->live = 0;
        }
    }
    if (seq > q->una)
        q->una = seq;
}

static void rearm(struct tn_qp *q, double now)
{
    if (q->rtt_cand >= 0) {
        rtt_sample(q, q->rtt_cand);
        q->rtt_cand = -1;
    }
    if (q->progress) {
        q->progress = 0;
        q->rto = rto_value(q);
        q->rto_deadline = q->sent_up_to > q->una ? now + q->rto : -1;
    }
}

/* Whether seq is in mode fec's open block and that block will close without waiting
 * for an ACK: the QP may send more, or it is window-blocked with half a block open
 * (tn_qp_poll closes it).  traffic/requester.py _in_open_block. */
static int in_open_block(const struct tn_qp *q, int64_t seq)
{
    if (!q->n_open || seq < q->open_seqs[0])
        return 0;
    return q->sent_up_to - q->una < (int64_t)q->win_pkts || 2 * q->n_open >= q->a.fec_k;
}

/* How many of a block's data packets (base + i x stride, i < n) the ACKs show missing:
 * not acknowledged, though a packet sent after them was.  More than the block's repairs
 * and it cannot be rebuilt whatever arrives: its losses are resent at once, not after
 * the rest of its group and its repairs went out.  traffic/requester.py _missing. */
static uint32_t missing(struct tn_qp *q, int64_t base, uint32_t n, uint32_t stride,
                        int64_t hi)
{
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct tpkt *p = pkt_get(q, base + (int64_t)i * stride);
        if (p && !p->acked && p->last_tx >= 0 && p->last_tx < hi)
            c++;
    }
    return c;
}

/* the live group's block that seq is in has lost more than its repairs */
static int group_block_failed(struct tn_qp *q, int64_t seq, int64_t hi)
{
    const struct tgroup *g = &q->cg;
    uint32_t nb = g->blocks ? g->blocks : 1;
    uint32_t j = (uint32_t)((seq - g->first_seq) % nb);
    uint32_t n = g->added > j ? (g->added - 1 - j) / nb + 1 : 0;
    return missing(q, g->first_seq + j, n, nb, hi) > g->m;
}

static void detect_losses(struct tn_qp *q)
{
    struct dq *o = &q->tx_order;
    int64_t hi = q->hi_tx;
    while (o->len && dq_front(o)->a < hi) {
        int64_t tx = dq_front(o)->a, seq = dq_front(o)->b;
        struct tpkt *p = pkt_get(q, seq);
        if (!p || p->acked || p->last_tx != tx) {
            dq_pop(o);
            continue;
        }
        if (p->block >= 0 && p->retx == 0) {
            struct tblock *b = &q->blocks[p->block & q->bmask];
            if (b->live && b->bid == p->block && (b->repair_tx < 0 || b->repair_tx >= hi) &&
                missing(q, b->base, b->count, b->stride, hi) <= b->m)
                break;  /* the receiver may still repair this block */
        } else if (p->retx == 0 && p->grp && q->cg.live && p->seq >= q->cg.first_seq &&
                   p->seq < q->cg.first_seq + q->cg.count) {
            if (!group_block_failed(q, seq, hi))
                break;  /* its group is still being sent: its blocks' repairs are to come */
        } else if (p->retx == 0 && in_open_block(q, seq)) {
            if (missing(q, q->open_seqs[0], q->n_open, 1, hi) <= q->a.fec_m)
                break;  /* its block is still being sent: the same, for mode fec */
        }
        dq_pop(o);
        if (!p->queued) {
            p->queued = 1;
            dq_push(&q->retx_q, seq, 0, NULL);
            if (!p->grp && p->retx == 0 && q->a.mode == TN_MODE_AUTO) {
                q->est_lost++;  /* recovery.LossEstimator.on_lost */
                if (seq == q->est_last + 1)
                    q->est_pairs++;
                q->est_last = seq;
            }
        }
    }
}

static int64_t abs_seq(const struct tn_qp *q, uint32_t psn)
{
    uint32_t ref = (q->a.start_psn + (uint32_t)q->una) & TN_PSN_MASK;
    return q->una + psn_diff(psn, ref);
}

void tn_qp_on_ack(struct tn_qp *q, const struct tn_pkt *pk, double now, struct tn_cq_sink *cq)
{
    if (!pk->has_aeth)
        return;
    int64_t psn_seq = abs_seq(q, pk->psn);
    if ((pk->syndrome & 0x60) == 0x60) {
        q->c.naks_rx++;
        if (pk->syndrome == SYN_NAK_SEQ) {
            ack_up_to(q, psn_seq, now, cq);
            if (q->una == psn_seq && psn_seq <= q->sent_up_to)
                go_back(q, psn_seq);
        }
        settle_retx_acks(q, now);
        rearm(q, now);
        return;
    }
    q->c.acks_rx++;
    ack_up_to(q, psn_seq + 1, now, cq);
    if (pk->has_sack && q->a.mode != TN_MODE_GBN) {
        int64_t base = abs_seq(q, pk->sack_base);
        for (uint32_t i = 0; i < pk->sack_len; i++) {
            uint8_t b = pk->sack_bits[i];
            if (!b)
                continue;
            for (int bit = 0; bit < 8; bit++)
                if (b & (0x80 >> bit))
                    mark_acked(q, base + i * 8 + bit, now);
        }
    }
    settle_retx_acks(q, now);
    if (q->a.mode != TN_MODE_GBN)
        detect_losses(q);
    rearm(q, now);
}

/* traffic/echo_guard.py: 0 to take the echo, else 1 + the reason's index */
static int echo_reject(const struct tn_hop *hops, int n, int64_t ack_seq, int64_t una,
                       int64_t next_seq, uint32_t window)
{
    int64_t w = window > 1 ? window : 1;
    if (!(una - w <= ack_seq && ack_seq <= next_seq))
        return 1;
    if (n < 1 || n > TN_MAX_HOPS)
        return 2;
    for (int i = 0; i < n; i++) {
        if (hops[i].queue_bytes > (128u << 20))
            return 3;
        if (!(hops[i].line_rate >= 1 && hops[i].line_rate <= 1600000u))
            return 4;
    }
    return 0;
}

void tn_qp_on_echo(struct tn_qp *q, const struct tn_hop *hops, int n, const struct tn_pkt *p,
                   double now)
{
    q->c.echo_acks++;
    if (!q->hp || !p->has_aeth)
        return;
    int nak = (p->syndrome & 0x60) == 0x60;
    int64_t ack_seq = abs_seq(q, p->psn) + (nak ? 0 : 1);
    int why = echo_reject(hops, n, ack_seq, q->una, q->sent_up_to, q->a.window_pkts);
    if (why) {
        q->echo_rejected[why - 1]++;
        return;
    }
    q->echo_accepted++;
    uint64_t mq = 0;
    struct tn_int_hop ih[TN_MAX_HOPS];
    for (int i = 0; i < n; i++) {
        if (hops[i].queue_bytes > mq)
            mq = hops[i].queue_bytes;
        ih[i] = (struct tn_int_hop){hops[i].node_id, hops[i].egress_ts, hops[i].tx_bytes,
                                    hops[i].queue_bytes, hops[i].line_rate};
    }
    if (mq > q->max_queue)
        q->max_queue = mq;
    if (q->first_queue_s < 0 && mq)
        q->first_queue_s = now;
    double before = q->hp->rate_bps;
    if (tn_hpcc_on_ack(q->hp, ih, (uint32_t)n, ack_seq, q->sent_up_to, hpcc_T(q), now) == 1) {
        if (q->hp->rate_bps < before && q->first_queue_s >= 0 && q->first_cut_s < 0)
            q->first_cut_s = now;
        apply_cc_rate(q, now);
    }
    hpcc_window(q);
}

void tn_qp_on_cnp(struct tn_qp *q, double now)
{
    q->c.cnps_rx++;
    if (q->dc && tn_dcqcn_on_cnp(q->dc, now))
        apply_cc_rate(q, now);
}

int tn_qp_set_rate(struct tn_qp *q, double rate, double now, char *err, size_t errlen)
{
    if (!(rate >= MIN_RATE && rate <= MAX_RATE)) {
        seterr(err, errlen, "token bucket: rate_bps=%g outside 1000..4e+11", rate);
        return -1;
    }
    if (!q->dc && !q->hp) {
        bk_set_rate(&q->bk, rate, now);
        q->a.rate_bps = rate;
        log_rate(q, now, rate);
        return 0;
    }
    q->rate_cap = rate;  /* with DCQCN or HPCC, feedback caps their rate */
    apply_cc_rate(q, now);
    return 0;
}

int tn_qp_set_fec(struct tn_qp *q, uint32_t k, uint32_t m, double now, char *err,
                  size_t errlen)
{
    (void)now;
    char where[64];
    snprintf(where, sizeof where, "QP %u FEC update", q->a.qpn);
    if (check_fec(k, m, err, errlen, q->a.qpn))
        return -1;
    if (q->a.role == TN_REQUESTER)
        close_block(q);
    q->a.fec_k = k;
    q->a.fec_m = m;
    return 0;
}

/* -- responder ----------------------------------------------------------------------- */
static int64_t r_abs(const struct tn_qp *q, uint32_t psn)
{
    uint32_t exp = (q->a.start_psn + (uint32_t)q->e) & TN_PSN_MASK;
    return q->e + psn_diff(psn, exp);
}

static void emit_recv_done(struct tn_qp *q, double now, struct tn_cq_sink *cq)
{
    q->msn = (q->msn + 1) & TN_PSN_MASK;
    q->c.msgs_done++;
    if (cq) {
        struct tn_wc wc = {.msg_id = (uint64_t)++q->msg_rx_id, .byte_len = q->cur_size,
                           .posted_s = q->cur_start, .done_s = now, .data = q->cur_buf,
                           .qpn = q->a.qpn, .kind = TN_WC_RECV_DONE, .crc32 = q->cur_crc,
                           .fec_repaired = q->cur_repaired};
        cq->push(cq->ctx, &wc);
    } else {
        free(q->cur_buf);
    }
    q->cur_buf = NULL;
}

static void deliver(struct tn_qp *q, int op, const uint8_t *reth, const uint8_t *payload,
                    uint32_t len, int repaired, double now, struct tn_cq_sink *cq)
{
    if (op_is_first(op)) {
        if (q->in_msg) {
            q->c.bad_opcode++;
            free(q->cur_buf);
            q->cur_buf = NULL;
        }
        uint64_t size = reth ? get32(reth + 12) : len;
        if (size > q->a.max_msg_bytes || size < len) {
            q->c.bad_length++;
            q->in_msg = 0;
            return;
        }
        q->in_msg = 1;
        q->cur_size = size;
        q->cur_off = 0;
        q->cur_crc = 0;
        q->cur_repaired = 0;
        q->cur_start = now;
        if (q->a.keep_data)
            q->cur_buf = malloc(size ? size : 1);
    }
    if (!q->in_msg) {
        q->c.bad_opcode++;
        return;
    }
    uint64_t end = q->cur_off + len;
    if (end > q->cur_size) {
        q->c.bad_length++;
        q->in_msg = 0;
        free(q->cur_buf);
        q->cur_buf = NULL;
        return;
    }
    if (q->cur_buf)
        memcpy(q->cur_buf + q->cur_off, payload, len);
    q->cur_crc = tn_crc32(q->cur_crc, payload, len);
    q->cur_off = end;
    if (repaired)
        q->cur_repaired++;
    q->c.delivered_bytes += len;
    if (op_is_last(op)) {
        q->in_msg = 0;
        if (q->cur_off != q->cur_size) {
            q->c.bad_length++;
            free(q->cur_buf);
            q->cur_buf = NULL;
            return;
        }
        emit_recv_done(q, now, cq);
    }
}

static struct sym_slot *sym_get(struct tn_qp *q, int64_t seq)
{
    struct sym_slot *s = &q->syms[seq & q->ymask];
    return s->seq == seq ? s : NULL;
}

static uint32_t make_symbol(uint8_t *sym, int op, const uint8_t *reth, const uint8_t *payload,
                            uint32_t len)
{
    sym[0] = (uint8_t)op; sym[1] = reth ? 1 : 0; put16(sym + 2, len);
    if (reth)
        memcpy(sym + 4, reth, TN_RETH);
    else
        memset(sym + 4, 0, TN_RETH);
    memcpy(sym + TN_SYM_HDR, payload, len);
    return TN_SYM_HDR + len;
}

static void try_repair(struct tn_qp *q, struct repair_set *rs, double now,
                       struct tn_cq_sink *cq);
static void accept(struct tn_qp *q, int64_t seq, int op, const uint8_t *reth,
                   const uint8_t *payload, uint32_t len, int repaired, double now,
                   struct tn_cq_sink *cq);

/* drop the sets no longer live from the age order */
static void compact_rorder(struct tn_qp *q)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < q->n_rorder; i++)
        if (q->rsets[q->rorder[i]].live)
            q->rorder[n++] = q->rorder[i];
    q->n_rorder = n;
}

/* every set in repair, oldest first (the order of the Python responder's dict; a set
 * decoded or dropped meanwhile is skipped, one opened meanwhile waits for next time) */
static void try_repair_all(struct tn_qp *q, double now, struct tn_cq_sink *cq)
{
    uint8_t order[MAX_REPAIR_SETS];
    int64_t bases[MAX_REPAIR_SETS];
    uint32_t n = q->n_rorder;
    memcpy(order, q->rorder, n);
    for (uint32_t i = 0; i < n; i++)
        bases[i] = q->rsets[order[i]].base;
    for (uint32_t i = 0; i < n; i++) {
        struct repair_set *rs = &q->rsets[order[i]];
        if (rs->live && rs->base == bases[i])
            try_repair(q, rs, now, cq);
    }
}

static void trim_fec(struct tn_qp *q)
{
    for (int i = 0; i < MAX_REPAIR_SETS; i++) {
        struct repair_set *rs = &q->rsets[i];
        if (rs->live && rs->base + (int64_t)(rs->count - 1) * rs->stride < q->e)
            rs->live = 0;
    }
}

static void accept(struct tn_qp *q, int64_t seq, int op, const uint8_t *reth,
                   const uint8_t *payload, uint32_t len, int repaired, double now,
                   struct tn_cq_sink *cq)
{
    int mode = (int)q->a.mode;
    if (mode == TN_MODE_FEC && seq >= q->e - KEEP_SYMBOLS && !sym_get(q, seq)) {
        struct sym_slot *s = &q->syms[seq & q->ymask];
        if (s->data || (s->data = malloc(TN_SYM_HDR + q->a.mtu))) {
            s->seq = seq;
            s->len = make_symbol(s->data, op, reth, payload, len);
        }
    }
    struct ooo_slot *os = &q->ooo[seq & q->omask];
    if (seq < q->e || (os->present && os->seq == seq)) {
        q->c.duplicates++;
        q->ack_due = 1;
        return;
    }
    if (seq > q->e) {
        if (mode == TN_MODE_GBN) {
            q->c.ooo_dropped++;
            if (q->nak_for != q->e) {
                q->nak_for = q->e;
                q->nak_due = 1;
                q->ack_due = 1;
            }
            return;
        }
        if (seq - q->e >= (int64_t)q->a.window_pkts * 2) {
            q->c.psn_out_of_window++;
            return;
        }
        if (!os->data && !(os->data = malloc(q->a.mtu)))
            return;
        os->seq = seq; os->present = 1; os->op = (uint8_t)op; os->has_reth = reth != NULL;
        if (reth)
            memcpy(os->reth, reth, TN_RETH);
        memcpy(os->data, payload, len);
        os->len = len;
        os->repaired = (uint8_t)repaired;
        q->ooo_n++;
        if (seq > q->ooo_hi)
            q->ooo_hi = seq;
        q->c.ooo_buffered++;
        q->ack_due = 1;
        if (mode == TN_MODE_FEC)
            try_repair_all(q, now, cq);
        return;
    }
    if (op_is_first(op) != !q->in_msg) {
        q->c.bad_opcode++;
        if (mode == TN_MODE_FEC) {
            struct sym_slot *s = sym_get(q, seq);
            if (s)
                s->seq = -1;
        }
        return;
    }
    deliver(q, op, reth, payload, len, repaired, now, cq);
    q->e++;
    for (;;) {
        struct ooo_slot *n = &q->ooo[q->e & q->omask];
        if (!(n->present && n->seq == q->e))
            break;
        n->present = 0;
        q->ooo_n--;
        deliver(q, n->op, n->has_reth ? n->reth : NULL, n->data, n->len, n->repaired, now, cq);
        q->e++;
    }
    if (!q->ooo_n)
        q->ooo_hi = -1;
    q->ack_due = 1;
    if (mode == TN_MODE_FEC)
        trim_fec(q);
}

static void try_repair(struct tn_qp *q, struct repair_set *rs, double now,
                       struct tn_cq_sink *cq)
{
    uint32_t count = rs->count, slen = rs->slen;
    uint8_t *data[128];
    int have[128];
    uint8_t *stage = malloc((size_t)count * slen);
    if (!stage)
        return;
    uint32_t got = 0;
    for (uint32_t i = 0; i < count; i++) {
        int64_t seq = rs->base + (int64_t)i * rs->stride;
        data[i] = stage + (size_t)i * slen;
        have[i] = 0;
        struct sym_slot *s = sym_get(q, seq);
        struct ooo_slot *os = &q->ooo[seq & q->omask];
        uint32_t l = 0;
        if (s) {
            l = s->len < slen ? s->len : slen;
            memcpy(data[i], s->data, l);
            have[i] = 1;
        } else if (os->present && os->seq == seq) {
            l = make_symbol(q->scratch, os->op, os->has_reth ? os->reth : NULL, os->data,
                            os->len);
            if (l > slen)
                l = slen;
            memcpy(data[i], q->scratch, l);
            have[i] = 1;
        } else if (seq < q->e) {
            rs->live = 0;
            free(stage);
            return;
        }
        if (have[i]) {
            memset(data[i] + l, 0, slen - l);
            got++;
        }
    }
    uint32_t missing = count - got;
    if (missing == 0) {
        rs->live = 0;
        free(stage);
        return;
    }
    if (missing > rs->nrep) {
        free(stage);
        return;
    }
    const uint8_t *din[128];
    const uint8_t *rin[16];
    for (uint32_t i = 0; i < count; i++)
        din[i] = have[i] ? data[i] : NULL;
    for (uint32_t j = 0; j < 16; j++)
        rin[j] = j < rs->m ? rs->rep[j] : NULL;
    int rc = tn_ec_decode(q->ec, (int)count, (int)rs->m, slen, din, rin, data);
    rs->live = 0;
    if (rc < 0) {
        q->c.bad_length++;
        free(stage);
        return;
    }
    q->c.fec_blocks_decoded++;
    int64_t base = rs->base, stride = rs->stride;
    for (uint32_t i = 0; i < count; i++) {
        if (have[i])
            continue;
        uint8_t *sym = data[i];
        uint32_t n = get16(sym + 2);
        if (n > slen - TN_SYM_HDR)
            n = slen - TN_SYM_HDR;
        q->c.fec_repaired++;
        accept(q, base + i * stride, sym[0], (sym[1] & 1) ? sym + 4 : NULL, sym + TN_SYM_HDR, n, 1, now,
               cq);
    }
    free(stage);
}

static void on_repair(struct tn_qp *q, int64_t base, const struct tn_pkt *p, double now,
                      struct tn_cq_sink *cq)
{
    if (p->fcount < 1 || p->findex >= p->fm || p->plen != p->fslen || p->fm > 16 ||
        p->fcount > 128 || p->fslen > TN_SYM_HDR + q->a.mtu) {
        q->c.bad_length++;
        return;
    }
    /* stride > 1: one block of an interleaved group (traffic.recovery), its members
     * stride packets apart */
    uint32_t stride = p->fstride > 1 ? p->fstride : 1;
    if (base + (int64_t)(p->fcount - 1) * stride < q->e)
        return;  /* whole block already delivered */
    struct repair_set *rs = NULL, *free_rs = NULL;
    for (int i = 0; i < MAX_REPAIR_SETS; i++) {
        if (q->rsets[i].live && q->rsets[i].base == base) {
            rs = &q->rsets[i];
            break;
        }
        if (!q->rsets[i].live && !free_rs)
            free_rs = &q->rsets[i];
    }
    if (!rs) {
        if (!free_rs)
            return;  /* too many blocks in repair: selective repeat recovers them */
        rs = free_rs;
        compact_rorder(q);
        q->rorder[q->n_rorder++] = (uint8_t)(rs - q->rsets);
        for (int j = 0; j < 16; j++) {
            free(rs->rep[j]);
            rs->rep[j] = NULL;
        }
        rs->live = 1; rs->base = base; rs->count = p->fcount; rs->m = p->fm;
        rs->slen = p->fslen; rs->nrep = 0; rs->stride = stride;
    }
    if (p->findex >= rs->m || p->plen != rs->slen)
        return;
    if (!rs->rep[p->findex]) {
        rs->rep[p->findex] = malloc(rs->slen);
        if (!rs->rep[p->findex])
            return;
        rs->nrep++;
    }
    memcpy(rs->rep[p->findex], p->payload, rs->slen);
    try_repair(q, rs, now, cq);
}

void tn_qp_on_packet(struct tn_qp *q, const struct tn_pkt *p, double now, struct tn_cq_sink *cq)
{
    q->c.rx_pkts++;
    int op = p->op;
    int64_t seq = r_abs(q, p->psn);
    int64_t limit = (int64_t)FAR_WINDOWS * q->a.window_pkts;
    if (op == OP_FEC_REPAIR) {
        if (!p->has_fec || q->a.mode != TN_MODE_FEC) {
            q->c.bad_opcode++;
            return;
        }
        if (seq - q->e < -limit || seq - q->e > limit) {
            q->c.psn_out_of_window++;
            return;
        }
        on_repair(q, seq, p, now, cq);
        return;
    }
    if (!op_is_data(op)) {
        q->c.bad_opcode++;
        return;
    }
    if (p->plen > q->a.mtu ||
        ((op == OP_WRITE_FIRST || op == OP_WRITE_MIDDLE) && p->plen != q->a.mtu)) {
        q->c.bad_length++;
        return;
    }
    int64_t d = seq - q->e;
    if (d > limit || d < -limit) {
        q->c.psn_out_of_window++;
        return;
    }
    q->c.rx_data_pkts++;
    if (p->has_reth && !(p->plen <= p->dma_len && p->dma_len <= q->a.max_msg_bytes)) {
        q->c.bad_length++;
        return;
    }
    accept(q, seq, op, p->has_reth ? p->reth_raw : NULL, p->payload, p->plen, 0, now, cq);
}

int tn_qp_take_ack(struct tn_qp *q, uint8_t *buf)
{
    if (!q->ack_due)
        return 0;
    q->ack_due = 0;
    uint32_t exp = (q->a.start_psn + (uint32_t)q->e) & TN_PSN_MASK;
    uint32_t n;
    if (q->nak_due) {
        q->nak_due = 0;
        q->c.naks_tx++;
        tn_pack_bth(buf, OP_ACK, q->a.peer_qpn, exp, 0, 0);
        put32(buf + TN_BTH, (uint32_t)SYN_NAK_SEQ << 24 | q->msn);
        n = TN_BTH + TN_AETH + TN_ICRC;
    } else {
        q->c.acks_tx++;
        tn_pack_bth(buf, OP_ACK, q->a.peer_qpn, (exp - 1) & TN_PSN_MASK, 0, 0);
        put32(buf + TN_BTH, (uint32_t)SYN_ACK << 24 | q->msn);
        n = TN_BTH + TN_AETH;
        if (q->ooo_n && q->a.mode != TN_MODE_GBN) {
            int64_t base = q->e + 1;
            int64_t nbits = q->ooo_hi - base + 1;
            if (nbits > 255 * 32)
                nbits = 255 * 32;
            uint32_t words = (uint32_t)((nbits + 31) / 32);
            put32(buf + n, words << 24 | (((uint32_t)base + q->a.start_psn) & TN_PSN_MASK));
            uint8_t *bits = buf + n + TN_SACK_HDR;
            memset(bits, 0, words * 4);
            for (int64_t s = base; s < base + nbits; s++) {
                struct ooo_slot *o = &q->ooo[s & q->omask];
                if (o->present && o->seq == s)
                    bits[(s - base) >> 3] |= 0x80 >> ((s - base) & 7);
            }
            n += TN_SACK_HDR + words * 4;
        }
        n += TN_ICRC;
    }
    tn_icrc_finish(buf, n, q->local_ip, q->a.peer_ip, q->sport, q->dport);
    return (int)n;
}

/* -- reporting ---------------------------------------------------------------------- */
void tn_qp_get_counters(const struct tn_qp *q, struct tn_qp_counters *c) { *c = q->c; }

int tn_qp_is_idle(const struct tn_qp *q)
{
    return q->una == q->next_seq && q->repair_q.len == 0;
}

void tn_qp_get_state(const struct tn_qp *q, struct tn_qp_state *s)
{
    memset(s, 0, sizeof *s);
    s->rate_bps = q->a.rate_bps;
    s->srtt_s = q->srtt;
    s->last_rtt_s = q->last_rtt;
    s->min_rtt_s = q->hpcc_rtt;
    s->rtt_samples = q->rtt_samples;
    s->rto_s = q->rto;
    s->outstanding = (uint64_t)(q->sent_up_to - q->una);
    s->una = (uint64_t)q->una;
    s->next_seq = (uint64_t)q->next_seq;
    s->sent_up_to = (uint64_t)q->sent_up_to;
    s->next_new_psn = (q->a.start_psn + (uint32_t)q->sent_up_to) & TN_PSN_MASK;
    s->expected_psn = (q->a.start_psn + (uint32_t)q->e) & TN_PSN_MASK;
    s->msn = q->msn;
    s->ooo_now = q->ooo_n;
    s->fec_k = q->a.fec_k;
    s->fec_m = q->a.fec_m;
    s->window_pkts = q->win_pkts;
    s->idle = (uint32_t)tn_qp_is_idle(q);
    s->sport = q->sport;
    s->est_sent = q->est_sent;
    s->est_lost = q->est_lost;
    s->est_pairs = q->est_pairs;
}

void tn_qp_get_cc(const struct tn_qp *q, struct tn_qp_cc *o)
{
    memset(o, 0, sizeof *o);
    o->rate_bps = q->a.rate_bps;
    o->rate_cap_bps = q->rate_cap;
    o->hpcc_rtt_s = q->hpcc_rtt;
    o->base_rtt_s = q->hp ? hpcc_T(q) : -1;
    o->first_queue_s = q->first_queue_s;
    o->first_cut_s = q->first_cut_s;
    o->max_echo_queue_bytes = q->max_queue;
    o->echo_accepted = q->echo_accepted;
    memcpy(o->echo_rejected, q->echo_rejected, sizeof o->echo_rejected);
    o->window_pkts = q->win_pkts;
    o->n_rate_log = q->n_log;
    o->rate_changes = q->rate_changes;
    for (uint32_t i = 0; i < q->n_log; i++) {
        o->rate_log_t[i] = q->log_t[(q->log_head + i) % TN_RATE_LOG];
        o->rate_log_v[i] = q->log_v[(q->log_head + i) % TN_RATE_LOG];
    }
    if (q->hp)
        o->hpcc = *q->hp;
    if (q->dc)
        o->dcqcn = *q->dc;
}
