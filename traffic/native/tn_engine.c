/* tn_engine.c - the engine: sockets, the I/O loop, pacing waits, completions, API.
 *
 * One engine per IPv4 address, one thread per engine.  The thread receives with
 * recvmmsg on ip:4791, hands each packet to its QP (tn_qp.c), sends the ACKs owed,
 * polls the requesters with work for the packets their pacers let go (sendmmsg per QP
 * socket) and then sleeps until the earliest due departure or timer: epoll on the
 * receive socket, a "kick" eventfd (API calls) and an absolute CLOCK_MONOTONIC timerfd
 * armed a lead before the due time, with the thread's timer slack at 1 ns; the lead is
 * spun on the clock, so a departure leaves within a few microseconds of its due time
 * and an idle engine burns nothing.  The lead follows the timer's own wake-up lateness
 * (stalls over 1 ms, which no lead would cover, are left out): its running p99 + 5 us
 * (20..60 us; on a virtual machine the median is ~20 us even at real-time priority)
 * while the engine's spin budget lasts (a share of a core, TN_ENGINE_SPIN_BUDGET), its
 * median when the budget is spent, and at real-time priority also while the thread's CPU
 * over the last second nears the kernel's real-time limit (rt_guard).  A departure that
 * is due goes before the receive work.
 * Per iteration the loop touches only the QPs with work: responders owing an ACK (a
 * dirty list), requesters that got an ACK, a CNP or an API call (a ready list) and
 * requesters whose wake time came (a min-heap on it); QPNs are found by a hash.
 *
 * Every API call takes the engine mutex; the thread holds it while it works and drops
 * it while it waits, and yields it between iterations when a caller waits for it.
 * Completions go to a growable queue with an eventfd that is readable while it is
 * not empty (Python selects on it with the GIL released).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <linux/errqueue.h>     /* (after time.h: struct scm_timestamping's timespec) */
#include <linux/net_tstamp.h>
#include "tn_internal.h"

#define SPIN_S 20e-6       /* lateness that counts as a late departure */
#define LEAD_MIN_S 20e-6   /* the spin lead: at least ... */
#define LEAD_MAX_S 60e-6   /* ... and at most: a QP at 10k pkt/s spins up to 60 % of its
                            * time, one at 2,500 pkt/s 15 % (a 20 us lead: 20 % and 5 %) */
#define SPIN_BUDGET 0.5    /* default spin budget: this share of a core, per engine (the
                            * p99 lead of a QP at 10k pkt/s took 34-39 % on a loaded VM,
                            * whose wake-ups were ~40 us late at the median) ... */
#define SPIN_DEPTH_S 20e-3 /* ... saved up to this many seconds of spin */
#define RT_HEADROOM 0.1    /* at real-time priority the thread spins and polls only while its
                           * CPU share stays this far below the kernel's real-time limit ... */
#define RT_BUCKETS 40      /* ... over the last second, counted in this many buckets ... */
#define RT_BUCKET_S 0.025  /* ... of this length (rt_guard) */
#define RX_POLL_GAP_S 25e-6 /* busy-poll the socket instead of sleeping while packets
                             * arrive at least this often (their mean gap) ... */
#define RX_POLL_MAX_S 50e-6 /* ... for twice that gap after the last, at most this long */
#define MAX_BATCH 256
#define GSO_MAX_SEGS 64      /* frames per UDP_SEGMENT send (the kernel's limit) ... */
#define GSO_MAX_BYTES 65000  /* ... and their bytes (one IPv4 datagram's) */
#define GRO_SLOT 65536       /* a receive slot that holds a coalesced read */
#define RX_CTL 128           /* cmsg space per received datagram (TOS, overflow, GRO) */

struct qent {
    struct tn_qp *q;
    uint32_t qpn;
    int fd;
    int dirty;          /* responder: an ACK may be owed (on the dirty list) */
    int ready;          /* requester: on the ready list (an ACK, CNP or API call) */
    int hpos;           /* requester: its place in the wake heap, -1 none */
    double due;         /* requester: its next wake (the heap's key) */
    double last_cnp;
    uint32_t injected;
    int txts;           /* requester with pacer smoothing: its socket reports each packet's
                         * software transmit timestamp (wire_departure) */
};

struct tn_engine {
    struct tn_engine_attr a;
    pthread_mutex_t mu;
    pthread_t th;
    int running;
    atomic_int stop, waiters;
    int rx_fd, ep_fd, kick_fd, timer_fd, cq_fd;
    struct timespec t0;
    struct qent *qs; int nq, capq;
    int *hash; uint32_t hmask;        /* qpn -> index into qs, -1 empty */
    /* per iteration the loop touches only the QPs with work, not every QP: responders
     * owing an ACK (dirty list), requesters something happened to (ready list) and
     * requesters whose wake time came (a min-heap on it) */
    int *dirtyl, ndirty, *readyl, nready, *heap, nheap;
    struct tn_wc *cq; uint32_t cq_cap, cq_head, cq_len;
    struct tn_engine_counters c;
    char err[256];
    struct tn_out_pkt *capt; int ncapt, capt_cap;  /* step mode output */
    uint8_t *txbufs; uint32_t *txlens;             /* batch * TN_MAX_PKT */
    uint8_t *rxbufs; uint8_t *rxctl;
    int gso;           /* TN_ENGINE_GSO (or env TN_ENGINE_GSO=1): segmentation offload */
    size_t rx_slot;    /* bytes per receive slot: TN_MAX_PKT, GRO_SLOT with gso */
    double planned;
    double lead;       /* spin lead: wake this long before a departure, spin the rest */
    double lead_p99;   /* the lead that covers 99 % of the timer's wake-ups (+ 5 us) */
    double lead_med;   /* the lead that covers half of them (the timer's median) */
    double lead_max;   /* the spin lead's cap: LEAD_MAX_S, or TN_ENGINE_LEAD_MAX_US */
    double budget;     /* spin budget, share of a core: < 0 none (always the p99 lead),
                        * 0: always the median lead */
    double spin_tokens, spin_t;  /* the budget's bucket (seconds of spin) and its clock */
    int spent;         /* the budget is spent (or rt_hot): the median lead */
    double rt_ceiling; /* the CPU share the real-time thread keeps under (rt_guard) ... */
    double rt_cpu[RT_BUCKETS];  /* ... its CPU seconds in each bucket of the last second */
    int rt_i;          /* the current bucket ... */
    double rt_t0, rt_cpu0;  /* ... its start, and the thread's CPU then */
    int rt_hot;        /* the last second's CPU is over the ceiling: no spin, no poll */
    double late_m;     /* the timer's median lateness (stochastic estimate) */
    double late_q;     /* running p99 estimate of the timer's wake-up lateness */
    double rx_last;    /* when the socket last gave packets (rx_drain) ... */
    double rx_gap;     /* ... and the mean gap between their arrivals (moving average) */
    double step_now;   /* step mode: the injected clock */
    struct held { double due; uint8_t *buf; uint32_t len, src; uint16_t sport; uint8_t tos; }
        *hq;           /* delay emulation: packets held, FIFO (traffic.emulation.DelayLine) */
    uint32_t hq_cap, hq_head, hq_len;
    uint64_t rng;      /* loss emulation: splitmix64 state */
    int bad;           /* Gilbert-Elliott: in the bad state */
};

static void eseterr(struct tn_engine *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
}

const char *tn_last_error(struct tn_engine *e) { return e ? e->err : "no engine"; }

static double now_of(const struct tn_engine *e)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - e->t0.tv_sec) + (double)(t.tv_nsec - e->t0.tv_nsec) * 1e-9;
}

double tn_now(struct tn_engine *e) { return now_of(e); }

/* the time of API calls: the injected clock in step mode */
static double api_now(const struct tn_engine *e)
{
    return (e->a.flags & TN_ENGINE_STEP) ? e->step_now : now_of(e);
}

int tn_api_version(void) { return TN_API_VERSION; }

size_t tn_sizeof(int which)
{
    switch (which) {
    case 0: return sizeof(struct tn_engine_attr);
    case 1: return sizeof(struct tn_qp_attr);
    case 2: return sizeof(struct tn_wc);
    case 3: return sizeof(struct tn_qp_counters);
    case 4: return sizeof(struct tn_engine_counters);
    case 5: return sizeof(struct tn_qp_state);
    case 6: return sizeof(struct tn_out_pkt);
    case 7: return sizeof(struct tn_qp_cc);
    default: return 0;
    }
}

void tn_free(void *data) { free(data); }

/* -- locking -------------------------------------------------------------------------- */
static void api_lock(struct tn_engine *e)
{
    atomic_fetch_add(&e->waiters, 1);
    pthread_mutex_lock(&e->mu);
    atomic_fetch_sub(&e->waiters, 1);
}
static void api_unlock(struct tn_engine *e) { pthread_mutex_unlock(&e->mu); }
static void kick(struct tn_engine *e)
{
    if (e->kick_fd >= 0) {
        uint64_t one = 1;
        ssize_t r = write(e->kick_fd, &one, 8);
        (void)r;
    }
}

/* -- QP table ----------------------------------------------------------------------- */
static struct qent *find(struct tn_engine *e, uint32_t qpn)
{
    if (!e->hash)
        return NULL;
    for (uint32_t h = (qpn * 2654435761u) & e->hmask;; h = (h + 1) & e->hmask) {
        int i = e->hash[h];
        if (i < 0)
            return NULL;
        if (e->qs[i].qpn == qpn)
            return &e->qs[i];
    }
}

static int rehash(struct tn_engine *e)
{
    uint32_t cap = 16;
    while (cap < (uint32_t)e->nq * 2 + 2)
        cap <<= 1;
    int *h = malloc(sizeof *h * cap);
    if (!h)
        return -1;
    for (uint32_t i = 0; i < cap; i++)
        h[i] = -1;
    for (int i = 0; i < e->nq; i++) {
        uint32_t x = (e->qs[i].qpn * 2654435761u) & (cap - 1);
        while (h[x] >= 0)
            x = (x + 1) & (cap - 1);
        h[x] = i;
    }
    free(e->hash);
    e->hash = h;
    e->hmask = cap - 1;
    return 0;
}

/* -- the QPs with work: dirty and ready lists, wake heap -------------------------------- */
static int grow_lists(struct tn_engine *e, int cap)
{
    int *a = realloc(e->dirtyl, sizeof *a * (size_t)cap);
    if (a)
        e->dirtyl = a;
    int *b = realloc(e->readyl, sizeof *b * (size_t)cap);
    if (b)
        e->readyl = b;
    int *c = realloc(e->heap, sizeof *c * (size_t)cap);
    if (c)
        e->heap = c;
    return a && b && c ? 0 : -1;
}

static void mark_dirty(struct tn_engine *e, struct qent *qe)
{
    if (!qe->dirty) {
        qe->dirty = 1;
        e->dirtyl[e->ndirty++] = (int)(qe - e->qs);
    }
}

static void mark_ready(struct tn_engine *e, struct qent *qe)
{
    if (!qe->ready && tn_qp_role(qe->q) == TN_REQUESTER) {
        qe->ready = 1;
        e->readyl[e->nready++] = (int)(qe - e->qs);
    }
}

static void heap_swap(struct tn_engine *e, int a, int b)
{
    int x = e->heap[a];
    e->heap[a] = e->heap[b];
    e->heap[b] = x;
    e->qs[e->heap[a]].hpos = a;
    e->qs[e->heap[b]].hpos = b;
}

static void heap_fix(struct tn_engine *e, int i)
{
    while (i > 0 && e->qs[e->heap[i]].due < e->qs[e->heap[(i - 1) / 2]].due) {
        heap_swap(e, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l < e->nheap && e->qs[e->heap[l]].due < e->qs[e->heap[m]].due)
            m = l;
        if (l + 1 < e->nheap && e->qs[e->heap[l + 1]].due < e->qs[e->heap[m]].due)
            m = l + 1;
        if (m == i)
            return;
        heap_swap(e, i, m);
        i = m;
    }
}

/* a requester's next wake: due < 0 takes it off the heap */
static void heap_set(struct tn_engine *e, int idx, double due)
{
    struct qent *qe = &e->qs[idx];
    if (due < 0) {
        if (qe->hpos >= 0) {
            int i = qe->hpos;
            heap_swap(e, i, --e->nheap);
            qe->hpos = -1;
            if (i < e->nheap)
                heap_fix(e, i);
        }
        return;
    }
    qe->due = due;
    if (qe->hpos < 0) {
        qe->hpos = e->nheap;
        e->heap[e->nheap++] = idx;
    }
    heap_fix(e, qe->hpos);
}

/* -- completions --------------------------------------------------------------------- */
static void cq_push(void *ctx, const struct tn_wc *wc)
{
    struct tn_engine *e = ctx;
    if (e->cq_len == e->cq_cap) {
        uint32_t nc = e->cq_cap * 2;
        struct tn_wc *nv = malloc(sizeof *nv * nc);
        if (!nv)
            return;  /* out of memory: the completion is lost, counters stay right */
        for (uint32_t i = 0; i < e->cq_len; i++)
            nv[i] = e->cq[(e->cq_head + i) & (e->cq_cap - 1)];
        free(e->cq);
        e->cq = nv; e->cq_cap = nc; e->cq_head = 0;
    }
    e->cq[(e->cq_head + e->cq_len) & (e->cq_cap - 1)] = *wc;
    if (e->cq_len++ == 0 && e->cq_fd >= 0) {
        uint64_t one = 1;
        ssize_t r = write(e->cq_fd, &one, 8);
        (void)r;
    }
}

int tn_poll_cq(struct tn_engine *e, struct tn_wc *wc, int n)
{
    api_lock(e);
    int k = 0;
    while (k < n && e->cq_len) {
        wc[k++] = e->cq[e->cq_head];
        e->cq_head = (e->cq_head + 1) & (e->cq_cap - 1);
        e->cq_len--;
    }
    if (!e->cq_len && e->cq_fd >= 0) {
        uint64_t v;
        ssize_t r = read(e->cq_fd, &v, 8);
        (void)r;
    }
    api_unlock(e);
    return k;
}

int tn_cq_fd(struct tn_engine *e) { return e->cq_fd; }

int tn_wait_cq(struct tn_engine *e, double timeout_s)
{
    struct pollfd p = {.fd = e->cq_fd, .events = POLLIN};
    int ms = timeout_s < 0 ? -1 : (int)(timeout_s * 1000 + 0.999);
    return poll(&p, 1, ms) > 0 ? 1 : 0;
}

/* -- sending ------------------------------------------------------------------------- */
/* ``ts``: ask the kernel for the last packet's software transmit timestamp
 * (wire_departure reads it) */
static void send_batch_ts(struct tn_engine *e, struct qent *qe, uint32_t dst_ip,
                          uint8_t *bufs, uint32_t *lens, int n, int ts)
{
    if (n <= 0)
        return;
    if (e->a.flags & TN_ENGINE_STEP) {
        for (int i = 0; i < n; i++) {
            if (e->ncapt == e->capt_cap) {
                int nc = e->capt_cap ? e->capt_cap * 2 : 64;
                struct tn_out_pkt *nv = realloc(e->capt, sizeof *nv * (size_t)nc);
                if (!nv)
                    return;
                e->capt = nv; e->capt_cap = nc;
            }
            struct tn_out_pkt *o = &e->capt[e->ncapt++];
            o->qpn = qe->qpn; o->dst_ip = dst_ip; o->len = lens[i];
            o->tos = (uint8_t)tn_qp_tos(qe->q);
            memcpy(o->buf, bufs + (size_t)i * TN_MAX_PKT, lens[i]);
        }
        return;
    }
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(e->a.port),
                             .sin_addr.s_addr = dst_ip};
    struct mmsghdr mm[MAX_BATCH];
    struct iovec iov[MAX_BATCH];
    union gso_ctl { char buf[CMSG_SPACE(sizeof(uint16_t))]; struct cmsghdr align; };
    union gso_ctl gctl[ts ? 1 : MAX_BATCH];
    int nm = 0;
    for (int i = 0; i < n; i++) {
        iov[i].iov_base = bufs + (size_t)i * TN_MAX_PKT;
        iov[i].iov_len = lens[i];
    }
    for (int i = 0; i < n; nm++) {
        /* one datagram per frame, or with segmentation offload a run of same-size frames
         * (the last of a run may be shorter: the kernel's last segment) as one send */
        int k = 1;
        uint32_t bytes = lens[i];
        if (e->gso && !ts) {
            while (i + k < n && k < GSO_MAX_SEGS && lens[i + k] <= lens[i] &&
                   bytes + lens[i + k] <= GSO_MAX_BYTES) {
                bytes += lens[i + k];
                k++;
                if (lens[i + k - 1] < lens[i])
                    break;
            }
        }
        memset(&mm[nm], 0, sizeof mm[nm]);
        mm[nm].msg_hdr.msg_name = &to;
        mm[nm].msg_hdr.msg_namelen = sizeof to;
        mm[nm].msg_hdr.msg_iov = &iov[i];
        mm[nm].msg_hdr.msg_iovlen = (size_t)k;
        if (k > 1) {
            struct msghdr *h = &mm[nm].msg_hdr;
            memset(&gctl[nm], 0, sizeof gctl[nm]);
            h->msg_control = gctl[nm].buf;
            h->msg_controllen = sizeof gctl[nm].buf;
            struct cmsghdr *cm = CMSG_FIRSTHDR(h);
            cm->cmsg_level = SOL_UDP;
            cm->cmsg_type = UDP_SEGMENT;
            cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            uint16_t seg = (uint16_t)lens[i];
            memcpy(CMSG_DATA(cm), &seg, sizeof seg);
            e->c.gso_sends++;
            e->c.gso_pkts += (uint64_t)k;
        }
        i += k;
    }
    union { char buf[CMSG_SPACE(sizeof(uint32_t))]; struct cmsghdr align; } ctl;
    if (ts) {
        memset(&ctl, 0, sizeof ctl);
        struct msghdr *h = &mm[nm - 1].msg_hdr;
        h->msg_control = ctl.buf;
        h->msg_controllen = sizeof ctl.buf;
        struct cmsghdr *cm = CMSG_FIRSTHDR(h);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SO_TIMESTAMPING;
        cm->cmsg_len = CMSG_LEN(sizeof(uint32_t));
        uint32_t flags = SOF_TIMESTAMPING_TX_SOFTWARE;
        memcpy(CMSG_DATA(cm), &flags, sizeof flags);
    }
    int done = 0;
    while (done < nm) {
        int r = sendmmsg(qe->fd, mm + done, (unsigned)(nm - done), 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            /* these packets are lost: retransmission recovers them */
            e->c.send_errors += mm[done].msg_hdr.msg_iovlen;
            done++;
            continue;
        }
        done += r;
    }
    e->c.tx_batches++;
}

static void send_batch(struct tn_engine *e, struct qent *qe, uint32_t dst_ip, uint8_t *bufs,
                       uint32_t *lens, int n)
{
    send_batch_ts(e, qe, dst_ip, bufs, lens, n, 0);
}

/* -- receive path ---------------------------------------------------------------------- */
static int known_op(int op)
{
    return op_is_data(op) || op == OP_ACK || op == OP_CNP || op == OP_FEC_REPAIR;
}

static void process(struct tn_engine *e, const uint8_t *buf, uint32_t n, uint32_t src_ip,
                    uint16_t sport, uint8_t tos, double now)
{
    struct tn_cq_sink sink = {cq_push, e};
    if (n < TN_BTH + TN_ICRC) {
        e->c.truncated++;
        return;
    }
    struct tn_hop hops[TN_MAX_HOPS];
    int nhops = -1;
    if ((buf[4] & 0x20) && buf[0] == OP_ACK) {  /* INT echo behind the ICRC */
        const uint8_t *t = buf + n - 4;
        if (n < 24 || t[0] != 0xE1 || (t[1] >> 4) != 1 || t[3] != 5 || t[2] > TN_MAX_HOPS ||
            n - (4 + 20u * t[2]) < 20) {
            e->c.bad_echo++;
            return;
        }
        nhops = t[2];
        uint32_t start = n - (4 + 20u * (uint32_t)nhops);
        for (int i = 0; i < nhops; i++) {
            const uint8_t *h = buf + start + 20 * i;
            hops[i] = (struct tn_hop){get32(h), get32(h + 4), get32(h + 8), get32(h + 12),
                                      get32(h + 16)};
        }
        n = start;
    }
    if (!tn_icrc_ok(buf, n, src_ip, e->a.ip, sport, e->a.port)) {
        e->c.bad_icrc++;
        return;
    }
    struct tn_pkt p;
    if (tn_parse(buf, n, &p)) {
        e->c.truncated++;
        return;
    }
    if (!known_op(p.op)) {
        e->c.unexpected_opcode++;
        return;
    }
    struct qent *qe = find(e, p.dqp);
    if (p.op == OP_ACK || p.op == OP_CNP) {
        if (!qe || tn_qp_role(qe->q) != TN_REQUESTER) {
            e->c.unknown_qp++;
            return;
        }
        if (src_ip != tn_qp_peer_ip(qe->q)) {
            e->c.wrong_peer++;
            return;
        }
        mark_ready(e, qe);
        if (p.op == OP_CNP) {
            tn_qp_on_cnp(qe->q, now);
        } else {
            tn_qp_on_ack(qe->q, &p, now, &sink);
            if (nhops >= 0)
                tn_qp_on_echo(qe->q, hops, nhops, &p, now);
        }
        return;
    }
    if (!qe || tn_qp_role(qe->q) != TN_RESPONDER) {
        e->c.unknown_qp++;
        return;
    }
    if (src_ip != tn_qp_peer_ip(qe->q)) {
        e->c.wrong_peer++;
        return;
    }
    tn_qp_on_packet(qe->q, &p, now, &sink);
    mark_dirty(e, qe);
    if ((tos & 3) == 3 && p.op != OP_FEC_REPAIR && now - qe->last_cnp >= 50e-6) {
        qe->last_cnp = now;
        uint8_t cnp[TN_BTH + 16 + TN_ICRC];
        struct tn_qp_state st;
        tn_qp_get_state(qe->q, &st);
        memset(cnp, 0, sizeof cnp);
        /* the CNP names the requester's QP: the responder's peer QP */
        tn_pack_bth(cnp, OP_CNP, tn_qp_peer_qpn(qe->q), 0, 0, 1);
        tn_icrc_finish(cnp, sizeof cnp, e->a.ip, tn_qp_peer_ip(qe->q), (uint16_t)st.sport,
                       e->a.port);
        uint32_t len = sizeof cnp;
        uint8_t *b = e->txbufs;
        memcpy(b, cnp, len);
        send_batch(e, qe, tn_qp_peer_ip(qe->q), b, &len, 1);
        e->c.cnps_tx++;
    }
}

static void send_acks(struct tn_engine *e)
{
    for (int i = 0; i < e->ndirty; i++) {
        struct qent *qe = &e->qs[e->dirtyl[i]];
        qe->dirty = 0;
        int n = tn_qp_take_ack(qe->q, e->txbufs);
        if (n > 0) {
            uint32_t len = (uint32_t)n;
            send_batch(e, qe, tn_qp_peer_ip(qe->q), e->txbufs, &len, 1);
        }
    }
    e->ndirty = 0;
}

/* The kernel's transmit timestamps of what a QP just sent (taken by the driver, where a
 * capture of the interface sees it leave), the latest handed to the pacer: its catch-up
 * bound counts from the wire, so an interruption between the engine's clock read and
 * the driver (~25-30 us on this VM) makes a late departure, caught up at most catchup_s
 * per packet, not a departure the engine believes on time followed by a gap short by
 * the whole interruption.  The timestamps are CLOCK_REALTIME: moved to the engine's
 * clock by one pair of reads. */
static void wire_departure(struct tn_engine *e, struct qent *qe)
{
    int64_t ts = -1;
    for (int i = 0; i < MAX_BATCH; i++) {
        uint8_t data[64];
        union { char buf[256]; struct cmsghdr align; } ctl;
        struct iovec iov = {.iov_base = data, .iov_len = sizeof data};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                           .msg_controllen = sizeof ctl.buf};
        if (recvmsg(qe->fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
            break;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPING) {
                struct scm_timestamping t;
                memcpy(&t, CMSG_DATA(cm), sizeof t);
                if (t.ts[0].tv_sec || t.ts[0].tv_nsec)
                    ts = (int64_t)t.ts[0].tv_sec * 1000000000 + t.ts[0].tv_nsec;
            }
        }
    }
    if (ts < 0)
        return;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    double n = now_of(e);
    int64_t ago = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec - ts;
    e->c.tx_timestamps++;
    e->c.wire_delay_s += tn_qp_wire_departure(qe->q, n - (double)ago * 1e-9);
}

static double poll_requester(struct tn_engine *e, struct qent *qe, double now, int timers)
{
    struct tn_cq_sink sink = {cq_push, e};
    struct tn_out out = {.bufs = e->txbufs, .lens = e->txlens, .cap = (int)e->a.batch};
    double w = tn_qp_poll(qe->q, now, &out, (int)e->a.batch, &sink, timers);
    int ts = qe->txts && out.n > 0 && tn_qp_wants_wire_time(qe->q);
    send_batch_ts(e, qe, tn_qp_peer_ip(qe->q), out.bufs, out.lens, out.n, ts);
    if (ts && !(e->a.flags & TN_ENGINE_STEP))
        wire_departure(e, qe);
    return w;
}

/* the requesters with work (ready, or their wake time come): each polled once, its next
 * wake back on the heap; returns the earliest wake time (-1: none).  O(k log n) for k
 * QPs with work among n.  step: every requester, as the reference polls them. */
static double run_requesters(struct tn_engine *e, double now, int timers)
{
    if (e->a.flags & TN_ENGINE_STEP) {
        for (int i = 0; i < e->nq; i++)
            mark_ready(e, &e->qs[i]);
    }
    while (e->nheap && e->qs[e->heap[0]].due <= now) {
        int i = e->heap[0];
        heap_set(e, i, -1);
        mark_ready(e, &e->qs[i]);
    }
    for (int k = 0; k < e->nready; k++) {  /* (polling adds to no list) */
        int i = e->readyl[k];
        e->qs[i].ready = 0;
        double w = poll_requester(e, &e->qs[i], now, timers);
        double c = tn_qp_cc_wake(e->qs[i].q);
        if (c > now && (w < 0 || c < w) && !(e->a.flags & TN_ENGINE_STEP))
            w = c;
        heap_set(e, i, w);
    }
    e->nready = 0;
    return e->nheap ? e->qs[e->heap[0]].due : -1;
}

static double rng_u(struct tn_engine *e)  /* splitmix64, uniform in [0, 1) */
{
    uint64_t z = (e->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* common/loss.py's LossProcess.lost(), on the engine's own generator */
static int lost(struct tn_engine *e)
{
    const struct tn_engine_attr *a = &e->a;
    if (a->loss_kind == 1)
        return rng_u(e) < a->loss_p;
    int drop = rng_u(e) >= (e->bad ? a->loss_h : a->loss_k);
    if (e->bad) {
        if (rng_u(e) < a->loss_r)
            e->bad = 0;
    } else if (rng_u(e) < a->loss_p) {
        e->bad = 1;
    }
    return drop;
}

/* receive-side loss emulation: 1 when this packet is dropped (counted) */
static int emulated_loss(struct tn_engine *e, const uint8_t *buf, uint32_t n)
{
    if (!e->a.loss_kind || n == 0)
        return 0;
    int op = buf[0];
    if (!e->a.loss_scope_all && !op_is_data(op) && op != OP_FEC_REPAIR)
        return 0;
    if (!lost(e))
        return 0;
    e->c.injected_drops++;
    if (op == OP_FEC_REPAIR)
        e->c.injected_repair_drops++;
    else
        e->c.injected_data_drops++;
    if (n >= 8) {
        struct qent *qe = find(e, get32(buf + 4) & TN_PSN_MASK);
        if (qe)
            qe->injected++;
    }
    return 1;
}

/* a received packet: held for the receive delay, or processed now */
static void receive(struct tn_engine *e, const uint8_t *buf, uint32_t n, uint32_t src,
                    uint16_t sport, uint8_t tos, double now)
{
    if (emulated_loss(e, buf, n))
        return;
    if (e->a.rx_delay_s <= 0 && !e->hq_len) {
        process(e, buf, n, src, sport, tos, now);
        return;
    }
    if (e->hq_len == e->hq_cap) {
        uint32_t nc = e->hq_cap ? e->hq_cap * 2 : 1024;
        struct held *nv = malloc(sizeof *nv * nc);
        if (!nv)
            return;  /* out of memory: the packet is lost, retransmission recovers it */
        for (uint32_t i = 0; i < e->hq_len; i++)
            nv[i] = e->hq[(e->hq_head + i) & (e->hq_cap - 1)];
        free(e->hq);
        e->hq = nv; e->hq_cap = nc; e->hq_head = 0;
    }
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy)
        return;
    memcpy(copy, buf, n);
    e->hq[(e->hq_head + e->hq_len++) & (e->hq_cap - 1)] =
        (struct held){now + e->a.rx_delay_s, copy, n, src, sport, tos};
}

/* process the held packets that are due; the next due time (-1: none held) */
static double release_held(struct tn_engine *e, double now)
{
    while (e->hq_len) {
        struct held *h = &e->hq[e->hq_head];
        if (h->due > now)
            return h->due;
        struct held x = *h;
        e->hq_head = (e->hq_head + 1) & (e->hq_cap - 1);
        e->hq_len--;
        process(e, x.buf, x.len, x.src, x.sport, x.tos, now);
        free(x.buf);
    }
    return -1;
}

/* read what waits (8 batches at most); 1 when the socket was left empty */
static int rx_drain(struct tn_engine *e, double now)
{
    int total = 0, empty = 1;
    int batch = (int)e->a.batch;
    for (int round = 0; round < 8; round++) {
        struct mmsghdr mm[MAX_BATCH];
        struct iovec iov[MAX_BATCH];
        struct sockaddr_in from[MAX_BATCH];
        for (int i = 0; i < batch; i++) {
            iov[i].iov_base = e->rxbufs + (size_t)i * e->rx_slot;
            iov[i].iov_len = e->rx_slot;
            memset(&mm[i], 0, sizeof mm[i]);
            mm[i].msg_hdr.msg_name = &from[i];
            mm[i].msg_hdr.msg_namelen = sizeof from[i];
            mm[i].msg_hdr.msg_iov = &iov[i];
            mm[i].msg_hdr.msg_iovlen = 1;
            mm[i].msg_hdr.msg_control = e->rxctl + (size_t)i * RX_CTL;
            mm[i].msg_hdr.msg_controllen = RX_CTL;
        }
        int r = recvmmsg(e->rx_fd, mm, (unsigned)batch, MSG_DONTWAIT, NULL);
        if (r <= 0)
            break;
        e->c.rx_batches++;
        if (round == 0) {  /* the arrival rate, for the receive poll (the loop) */
            double x = (now - e->rx_last) / r;
            e->rx_gap += ((x < 1.0 ? x : 1.0) - e->rx_gap) / 8;
            e->rx_last = now;
        }
        for (int i = 0; i < r; i++) {
            uint8_t tos = 0;
            uint32_t seg = 0;  /* a coalesced read (UDP_GRO): its frames' size */
            for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mm[i].msg_hdr); cm;
                 cm = CMSG_NXTHDR(&mm[i].msg_hdr, cm)) {
                if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS)
                    tos = *CMSG_DATA(cm);
                else if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_RXQ_OVFL) {
                    uint32_t v;
                    memcpy(&v, CMSG_DATA(cm), 4);
                    e->c.kernel_drops = v;
                } else if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
                    int v;
                    memcpy(&v, CMSG_DATA(cm), sizeof v);
                    seg = v > 0 ? (uint32_t)v : 0;
                }
            }
            const uint8_t *p = iov[i].iov_base;
            uint32_t left = mm[i].msg_len;
            if (mm[i].msg_hdr.msg_flags & MSG_TRUNC) {  /* (a slot holds any datagram) */
                e->c.truncated++;
                continue;
            }
            if (seg && left > seg) {
                e->c.gro_reads++;
                e->c.gro_pkts += (left + seg - 1) / seg;
            } else {
                seg = left;
            }
            do {  /* each frame as its own datagram (the last may be shorter; an empty
                   * datagram is one too, counted truncated) */
                uint32_t len = left < seg ? left : seg;
                e->c.rx_pkts++;
                receive(e, p, len, from[i].sin_addr.s_addr, ntohs(from[i].sin_port), tos,
                        now);
                p += len;
                left -= len;
            } while (left > 0);
        }
        total += r;
        if (r < batch)
            break;
        if (round == 7)
            empty = 0;
    }
    (void)total;
    return empty;
}

/* -- the loop ---------------------------------------------------------------------- */
/* A timer armed for ``armed`` woke at ``woke``: track the p99 and the median of that
 * lateness (stochastic quantile estimates, 1 us steps).  A lead of the p99 + 5 us lands
 * 99 % of wake-ups before their departure however late this host's timers are (~20 us
 * at the median on a virtual machine, even at real-time priority); the median lead
 * lands half of them early, at a few us of spin per departure instead of tens, and
 * keeps the rate (a lead of 0 let every real-time departure be ~25 us late, and the
 * pacer's catch-up cap turned that into an 8 % slower QP at 10k pkt/s). */
static void timer_woke(struct tn_engine *e, double armed, double woke)
{
    double x = woke - armed;
    if (x < 0 || x > 1e-3)  /* a stall (a busy host's scheduler): no lead would help */
        return;
    e->late_q += x > e->late_q ? 0.99e-6 : -0.01e-6;
    if (e->late_q < 0)
        e->late_q = 0;
    e->c.timer_late_p99_s = e->late_q;
    e->late_m += x > e->late_m ? 0.5e-6 : -0.5e-6;
    if (e->late_m < 0)
        e->late_m = 0;
    double lead = e->late_q + 5e-6;
    e->lead_p99 = lead < LEAD_MIN_S ? LEAD_MIN_S : lead > e->lead_max ? e->lead_max : lead;
    e->lead_med = e->late_m < e->lead_max ? e->late_m : e->lead_max;
}

/* The kernel stops every real-time thread of a CPU for the rest of a period (1 s) once
 * they have run kernel.sched_rt_runtime_us of it (95 %): the CPU then idles however
 * runnable they are.  The engine's thread alone ran 95 % of a core at 100 Mbit/s (a
 * p99 lead of ~60 us spun before departures 88 us apart, and the receive poll), so
 * every second or two it stopped for 25-37 ms (traced: runnable at SCHED_FIFO, the CPU
 * idle), and the two messages in flight finished that much late with nothing lost, the
 * p99 of a recovery sweep's cell (mininet_topos/presets/README.md, "The engine under
 * the kernel's real-time limit").  So, at real-time
 * priority, the thread counts its CPU time over the last second (as the kernel does,
 * in RT_BUCKET_S steps) and, while that is over the limit less RT_HEADROOM (room for
 * the host's other real-time threads on its CPU), leads by the median and does not
 * poll: it sleeps between departures until the second's share is back under it.  Why
 * a second and not a share per short window: spin is what paces the senders to the
 * microsecond, and a guard that halved the spin budget after every 50 ms window over
 * 80 % cost them 4-7 % of their goodput (measured); over the kernel's own period the
 * thread spins whenever the kernel would let it.  No guard where the kernel sets no
 * limit (-1). */
static double rt_limit(void)
{
    long runtime = -1, period = 0;
    FILE *f = fopen("/proc/sys/kernel/sched_rt_runtime_us", "r");
    if (f) {
        if (fscanf(f, "%ld", &runtime) != 1)
            runtime = 950000;
        fclose(f);
    } else {
        runtime = 950000;  /* the kernel's default */
    }
    f = fopen("/proc/sys/kernel/sched_rt_period_us", "r");
    if (!f || fscanf(f, "%ld", &period) != 1 || period <= 0)
        period = 1000000;
    if (f)
        fclose(f);
    return runtime < 0 ? -1 : (double)runtime / (double)period;
}

static double thread_cpu_s(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0)
        return -1;
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void rt_guard(struct tn_engine *e, double now)
{
    if (!e->c.realtime || e->rt_ceiling < 0 || now - e->rt_t0 < RT_BUCKET_S)
        return;
    double c = thread_cpu_s();
    if (c < 0 || e->rt_cpu0 < 0) {
        e->rt_t0 = now;
        e->rt_cpu0 = c;
        return;
    }
    /* the buckets passed since the last count (asleep: none ran) are emptied, the CPU
     * since then goes to the newest */
    long steps = (long)((now - e->rt_t0) / RT_BUCKET_S);
    for (long k = 0; k < steps && k < RT_BUCKETS; k++) {
        e->rt_i = (e->rt_i + 1) % RT_BUCKETS;
        e->rt_cpu[e->rt_i] = 0;
    }
    e->rt_cpu[e->rt_i] = c - e->rt_cpu0;
    double sum = 0;
    for (int k = 0; k < RT_BUCKETS; k++)
        sum += e->rt_cpu[k];
    e->rt_hot = sum > e->rt_ceiling * RT_BUCKETS * RT_BUCKET_S;
    e->rt_t0 = now;
    e->rt_cpu0 = c;
}

/* The lead for the next wait: the p99 lead while the spin budget has credit (a bucket
 * of spin seconds filled at ``budget`` of a core, SPIN_DEPTH_S deep, drained by every
 * spin), the median lead when it is spent (or rt_guard holds it), so an engine spins
 * at most about its budget however many QPs it paces: microsecond pacing at 10k pkt/s,
 * and a bounded cost at any rate (a QP whose gaps are shorter than the lead keeps the
 * engine awake anyway). */
static void choose_lead(struct tn_engine *e, double now)
{
    rt_guard(e, now);
    if (e->budget > 0) {
        double t = e->spin_tokens + (now - e->spin_t) * e->budget;
        double depth = SPIN_DEPTH_S;
        e->spin_tokens = t < depth ? t : depth;
    }
    if (e->spent)  /* the time since the last choice was led by the median for want of budget */
        e->c.budget_out_s += now - e->spin_t;
    e->spin_t = now;
    e->spent = (e->budget > 0 && e->spin_tokens <= 0) || (e->budget != 0 && e->rt_hot);
    e->lead = (e->budget < 0 && !e->rt_hot) || (e->budget > 0 && !e->spent) ? e->lead_p99
                                                                              : e->lead_med;
    e->c.spin_lead_s = e->lead;
}

/* spin on the clock, without the lock, until ``until`` (or stop); charged to the budget */
static void spin_until(struct tn_engine *e, double until)
{
    pthread_mutex_unlock(&e->mu);
    double t0 = now_of(e), t = t0;
    while (t < until && !atomic_load(&e->stop))
        t = now_of(e);
    pthread_mutex_lock(&e->mu);
    e->c.spins++;
    e->c.spin_s += t - t0;
    e->spin_tokens -= t - t0;
}

static void arm_timer(struct tn_engine *e, double at)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (at >= 0) {
        double t = (double)e->t0.tv_sec + (double)e->t0.tv_nsec * 1e-9 + at;
        if (t <= 0)
            t = 1e-9;
        its.it_value.tv_sec = (time_t)t;
        its.it_value.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
            its.it_value.tv_nsec = 1;
    }
    timerfd_settime(e->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* The lead (choose_lead): the p99 lead within a spin budget, TN_ENGINE_SPIN_BUDGET (a
 * share of a core, 0..1, SPIN_BUDGET by default); TN_ENGINE_SPIN=1 lifts the budget (the
 * p99 lead always: microsecond pacing on a host with a core to spare), =0 leads by the
 * median only (a few us of spin per departure; bench_engine's pacing rows compare them). */
/* A TN_ENGINE_* value the engine cannot use: the default runs, and stderr says so once
 * per engine (the Python API refuses such values before it gets here:
 * traffic/native/engine_env.py; a C program has only this line). */
static void env_ignored(const char *name, const char *value, const char *takes)
{
    fprintf(stderr, "tn_engine: %s=\"%s\" ignored (it takes %s); the default applies\n",
            name, value, takes);
}

/* Segmentation offload: the flag (C programs), or env TN_ENGINE_GSO=1 (how a Python
 * program asks for it); off by default, see TN_ENGINE_GSO. */
static int gso_of(uint32_t flags)
{
    const char *v = getenv("TN_ENGINE_GSO");
    if (v && *v && strcmp(v, "0") && strcmp(v, "1"))
        env_ignored("TN_ENGINE_GSO", v, "0 or 1");
    return (flags & TN_ENGINE_GSO) || (v && !strcmp(v, "1"));
}

static double spin_budget_of_env(void)
{
    const char *spin = getenv("TN_ENGINE_SPIN");
    const char *budget = getenv("TN_ENGINE_SPIN_BUDGET");
    if (spin && !strcmp(spin, "1"))
        return -1;
    if (spin && !strcmp(spin, "0"))
        return 0;
    if (spin && *spin)
        env_ignored("TN_ENGINE_SPIN", spin, "0 or 1");
    if (budget && *budget) {
        char *end;
        double b = strtod(budget, &end);
        if (end != budget && !*end && b >= 0 && b <= 1)
            return b;
        env_ignored("TN_ENGINE_SPIN_BUDGET", budget, "a share of a core, 0..1");
    }
    return SPIN_BUDGET;
}

/* The spin lead's cap: LEAD_MAX_S, or TN_ENGINE_LEAD_MAX_US (20..1000 us).  Why a knob:
 * this VM's timer wakes 55-85 us late at the p99 even when idle, past the 60 us cap, so
 * ~2 % of a 10k pkt/s QP's departures are late by its tail; a host with a core to spare
 * (TN_ENGINE_SPIN=1) may lead by the whole tail instead (bench_engine's RT+spin+lead row). */
static double lead_max_of_env(void)
{
    const char *v = getenv("TN_ENGINE_LEAD_MAX_US");
    if (v && *v) {
        char *end;
        double us = strtod(v, &end);
        if (end != v && !*end && us >= 20 && us <= 1000)
            return us * 1e-6;
        env_ignored("TN_ENGINE_LEAD_MAX_US", v, "microseconds, 20..1000");
    }
    return LEAD_MAX_S;
}

static void *loop(void *arg)
{
    struct tn_engine *e = arg;
    sigset_t all;  /* signals go to the caller's threads (Python handles SIGTERM there) */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    /* The engine thread is the host's emulated NIC: a RoCE NIC acknowledges in hardware
     * whatever the host's CPUs do, and a peer's retransmission timer counts on that.
     * At normal priority a loaded host (load 10-15 on 2 cores) left it unscheduled for
     * 30-150 ms while packets waited in its socket, long past its peers' timers: 0-5
     * retransmissions per rank of a loss-free loopback all-reduce.  So it runs at
     * SCHED_FIFO priority 1 by default, best effort (needs CAP_SYS_NICE);
     * TN_ENGINE_RT=0 opts out.  Its p99 lead spins within a budget (choose_lead): unbounded,
     * it takes up to 60 % of a CPU at 10k pkt/s, which at real-time priority is
     * taken from the host's other work (the test bed's switches).  The timer slack
     * (1 ns above) matters at normal priority only: real-time threads have none. */
    const char *rt = getenv("TN_ENGINE_RT");
    if (rt && *rt && strcmp(rt, "0") && strcmp(rt, "1"))
        env_ignored("TN_ENGINE_RT", rt, "0 or 1");
    if ((e->a.flags & TN_ENGINE_RT) || !(rt && !strcmp(rt, "0"))) {
        struct sched_param sp = {.sched_priority = 1};
        if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0)
            e->c.realtime = 1;
    }
    e->spin_t = now_of(e);
    e->spin_tokens = e->budget > 0 ? e->budget * SPIN_DEPTH_S : 0;
    double limit = rt_limit();
    e->rt_ceiling = limit < 0 ? -1 : limit - RT_HEADROOM;
    e->rt_t0 = e->spin_t;
    e->rt_cpu0 = thread_cpu_s();
    pthread_mutex_lock(&e->mu);
    while (!atomic_load(&e->stop)) {
        double now = now_of(e);
        uint64_t rx0 = e->c.rx_pkts;
        if (e->planned >= 0 && now - e->planned > SPIN_S) {
            e->c.late_departures++;
            e->c.late_s += now - e->planned;
        }
        if (e->planned >= 0)  /* a departure is due: it goes before any receive work */
            run_requesters(e, now, 0);
        int drained = rx_drain(e, now);
        double held = release_held(e, now);
        send_acks(e);
        /* ACKs share the socket with data: no retransmission timer fires while packets
         * are left unread (traffic/endpoint.py) */
        double wake = run_requesters(e, now, drained);
        if (!drained)
            wake = now;
        if (held >= 0 && (wake < 0 || held < wake))
            wake = held;
        e->planned = -1;
        double n1 = now_of(e);
        choose_lead(e, n1);
        if (wake >= 0 && wake <= n1 + e->lead) {
            if (e->lead > 0) {  /* due within the spin window: spin on the clock */
                spin_until(e, wake);
                e->planned = wake;
                continue;
            }
            e->planned = wake;  /* due now (no lead: no spin) */
            if (!atomic_load(&e->waiters))
                continue;
        }
        if (atomic_load(&e->waiters)) {  /* an API call waits: let it in */
            pthread_mutex_unlock(&e->mu);
            if (e->c.realtime) {  /* sched_yield would not give way to a normal thread */
                struct timespec gap = {.tv_sec = 0, .tv_nsec = 20000};
                nanosleep(&gap, NULL);
            } else {
                sched_yield();
            }
            pthread_mutex_lock(&e->mu);
            continue;
        }
        /* Packets arrive faster than a wake-up costs: read the socket again rather than
         * sleep.  A sleeping engine is woken by the sender's own send through a veth
         * (the receive path runs in the sender's syscall): that wake-up cost a paced
         * sender on this VM 13 us per packet, more than a 100k pkt/s gap leaves it.
         * Only while the mean arrival gap is short (an idle engine still sleeps), for
         * twice that gap after the last packet, and within the spin budget, which it
         * draws on as the spin does (none with TN_ENGINE_SPIN=0). */
        if (e->rx_gap < RX_POLL_GAP_S && !(e->a.flags & TN_ENGINE_STEP) &&
            ((e->budget < 0 && !e->rt_hot) || (e->budget > 0 && !e->spent)) &&
            n1 - e->rx_last < (2 * e->rx_gap < RX_POLL_MAX_S ? 2 * e->rx_gap : RX_POLL_MAX_S)) {
            if (e->c.rx_pkts == rx0) {  /* a pass that found nothing: poll time */
                e->c.rx_poll_s += n1 - now;
                e->spin_tokens -= n1 - now;
            }
            pthread_mutex_unlock(&e->mu);
            pthread_mutex_lock(&e->mu);
            continue;
        }
        double armed = wake >= 0 ? wake - e->lead : -1;
        arm_timer(e, armed);
        pthread_mutex_unlock(&e->mu);
        struct epoll_event ev[4];
        int r = epoll_wait(e->ep_fd, ev, 4, -1);
        double woke = now_of(e);
        pthread_mutex_lock(&e->mu);
        e->c.wakeups++;
        uint64_t v;
        for (int i = 0; i < r; i++) {
            if (ev[i].data.fd == e->kick_fd || ev[i].data.fd == e->timer_fd) {
                ssize_t x = read(ev[i].data.fd, &v, 8);
                (void)x;
                if (ev[i].data.fd == e->timer_fd && x == 8 && armed >= 0)
                    timer_woke(e, armed, woke);
            }
        }
        if (wake >= 0) {
            double n2 = now_of(e);
            if (n2 >= wake - e->lead && n2 < wake)  /* woken for a departure: spin */
                spin_until(e, wake);
            if (now_of(e) >= wake)
                e->planned = wake;
        }
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* -- API ------------------------------------------------------------------------------- */
struct tn_engine *tn_engine_create(const struct tn_engine_attr *attr, char *err, size_t errlen)
{
    struct tn_engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    e->a = *attr;
    if (!e->a.port)
        e->a.port = 4791;
    if (!e->a.batch)
        e->a.batch = 64;
    if (e->a.batch > MAX_BATCH)
        e->a.batch = MAX_BATCH;
    if (!e->a.rcvbuf_bytes)
        e->a.rcvbuf_bytes = 8u << 20;
    uint32_t cqd = 1024;
    while (cqd < (e->a.cq_depth ? e->a.cq_depth : 65536))
        cqd <<= 1;
    e->cq_cap = cqd;
    e->cq = malloc(sizeof *e->cq * cqd);
    e->rx_fd = e->ep_fd = e->kick_fd = e->timer_fd = e->cq_fd = -1;
    e->planned = -1;
    /* The lateness estimates start high, the p99 lead at its cap: they climb ~1 us per
     * late wake-up, so a start from the floor (20 us) left the first ~100 departures of
     * a QP at 10k pkt/s on a loaded VM (timer median ~29 us) late; down they fall at
     * 0.01 us per wake-up, 0.35 s at 10k pkt/s from the cap to the floor */
    e->lead_max = lead_max_of_env();
    e->late_q = e->lead_max - 5e-6;
    e->late_m = LEAD_MIN_S;
    e->lead = e->lead_p99 = e->lead_max;
    e->lead_med = e->late_m;
    e->c.timer_late_p99_s = e->late_q;
    e->c.spin_lead_s = e->lead;
    e->budget = e->c.spin_budget = spin_budget_of_env();
    e->rng = e->a.loss_seed;
    e->rx_gap = 1.0;
    if (!(e->a.rx_delay_s >= 0 && e->a.rx_delay_s <= 10.0)) {
        snprintf(err, errlen, "delay line: delay_s=%g outside 0..10 s", e->a.rx_delay_s);
        free(e->cq);
        free(e);
        return NULL;
    }
    if (e->a.loss_kind > 2) {
        snprintf(err, errlen, "engine: loss model %u unknown (0 none, 1 Bernoulli, 2 GE)",
                 e->a.loss_kind);
        free(e->cq);
        free(e);
        return NULL;
    }
    pthread_mutexattr_t ma;  /* priority inheritance: a caller preempted while holding
                              * the lock must not hold up an RT engine thread for long */
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_INHERIT);
    pthread_mutex_init(&e->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    clock_gettime(CLOCK_MONOTONIC, &e->t0);
    e->txbufs = malloc((size_t)e->a.batch * TN_MAX_PKT);
    e->txlens = malloc(sizeof *e->txlens * e->a.batch);
    e->gso = gso_of(e->a.flags);
    e->rx_slot = e->gso ? GRO_SLOT : TN_MAX_PKT;
    e->rxbufs = malloc((size_t)e->a.batch * e->rx_slot);
    e->rxctl = malloc((size_t)e->a.batch * RX_CTL);
    if (!e->cq || !e->txbufs || !e->txlens || !e->rxbufs || !e->rxctl || rehash(e)) {
        snprintf(err, errlen, "out of memory");
        tn_engine_destroy(e);
        return NULL;
    }
    e->cq_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (e->a.flags & TN_ENGINE_STEP)
        return e;
    e->rx_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1, rb = (int)e->a.rcvbuf_bytes;
    if (setsockopt(e->rx_fd, SOL_SOCKET, SO_RCVBUFFORCE, &rb, sizeof rb))
        setsockopt(e->rx_fd, SOL_SOCKET, SO_RCVBUF, &rb, sizeof rb);
    setsockopt(e->rx_fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof one);
    setsockopt(e->rx_fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
    if (e->gso)
        setsockopt(e->rx_fd, SOL_UDP, UDP_GRO, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(e->a.port),
                             .sin_addr.s_addr = e->a.ip};
    if (bind(e->rx_fd, (struct sockaddr *)&sa, sizeof sa)) {
        char ip[32];
        const uint8_t *b = (const uint8_t *)&e->a.ip;
        snprintf(ip, sizeof ip, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
        snprintf(err, errlen, "endpoint: cannot bind %s:%u: %s", ip, e->a.port, strerror(errno));
        tn_engine_destroy(e);
        return NULL;
    }
    e->ep_fd = epoll_create1(EPOLL_CLOEXEC);
    e->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    e->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    int fds[3] = {e->rx_fd, e->kick_fd, e->timer_fd};
    for (int i = 0; i < 3; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        epoll_ctl(e->ep_fd, EPOLL_CTL_ADD, fds[i], &ev);
    }
    return e;
}

int tn_engine_start(struct tn_engine *e)
{
    if (e->a.flags & TN_ENGINE_STEP) {
        eseterr(e, "a step-mode engine has no thread");
        return -1;
    }
    if (e->running)
        return 0;
    int r = pthread_create(&e->th, NULL, loop, e);
    if (r) {
        eseterr(e, "cannot start the engine thread: %s", strerror(r));
        return -1;
    }
    e->running = 1;
    return 0;
}

void tn_engine_destroy(struct tn_engine *e)
{
    if (!e)
        return;
    if (e->running) {
        atomic_store(&e->stop, 1);
        kick(e);
        pthread_join(e->th, NULL);
        e->running = 0;
    }
    for (int i = 0; i < e->nq; i++) {
        if (e->qs[i].fd >= 0)
            close(e->qs[i].fd);
        tn_qp_free(e->qs[i].q);
    }
    while (e->cq_len) {  /* undelivered received messages */
        free(e->cq[e->cq_head].data);
        e->cq_head = (e->cq_head + 1) & (e->cq_cap - 1);
        e->cq_len--;
    }
    int fds[5] = {e->rx_fd, e->ep_fd, e->kick_fd, e->timer_fd, e->cq_fd};
    for (int i = 0; i < 5; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    while (e->hq_len) {
        free(e->hq[e->hq_head].buf);
        e->hq_head = (e->hq_head + 1) & (e->hq_cap - 1);
        e->hq_len--;
    }
    free(e->hq);
    free(e->qs); free(e->hash); free(e->cq); free(e->capt);
    free(e->dirtyl); free(e->readyl); free(e->heap);
    free(e->txbufs); free(e->txlens); free(e->rxbufs); free(e->rxctl);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

int tn_create_qp(struct tn_engine *e, const struct tn_qp_attr *attr)
{
    api_lock(e);
    int rc = -1, fd = -1, txts = 0;
    if (find(e, attr->qpn)) {
        eseterr(e, "endpoint: QP %u already exists", attr->qpn);
        goto out;
    }
    uint16_t sport = (uint16_t)attr->sport;
    if (!(e->a.flags & TN_ENGINE_STEP)) {
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int v = IP_PMTUDISC_DO, one = 1, tos = (int)((attr->dscp << 2) | 2), sb = 4 << 20;
        setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, sizeof v);
        if (!e->gso)  /* (RoCEv2's zero UDP checksum; the kernel's GSO needs one) */
            setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &one, sizeof one);
        setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb, sizeof sb);
        if (attr->role == TN_REQUESTER && attr->catchup_s > 0) {  /* (wire_departure; each
                                                                  * send asks for its own) */
            int ts = SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_TSONLY;
            txts = setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &ts, sizeof ts) == 0;
        }
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = e->a.ip};
        socklen_t sl = sizeof sa;
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) ||
            getsockname(fd, (struct sockaddr *)&sa, &sl)) {
            eseterr(e, "QP %u: cannot bind a send socket: %s", attr->qpn, strerror(errno));
            close(fd);
            goto out;
        }
        sport = ntohs(sa.sin_port);
    }
    struct tn_qp *q = tn_qp_new(attr, e->a.ip, sport, e->a.port, api_now(e), e->err,
                                sizeof e->err);
    if (!q) {
        if (fd >= 0)
            close(fd);
        goto out;
    }
    if (e->nq == e->capq) {
        int nc = e->capq ? e->capq * 2 : 16;
        struct qent *nv = realloc(e->qs, sizeof *nv * (size_t)nc);
        if (!nv || grow_lists(e, nc)) {
            if (nv)
                e->qs = nv;
            tn_qp_free(q);
            if (fd >= 0)
                close(fd);
            eseterr(e, "out of memory");
            goto out;
        }
        e->qs = nv; e->capq = nc;
    }
    e->qs[e->nq++] = (struct qent){.q = q, .qpn = attr->qpn, .fd = fd, .last_cnp = -1.0,
                                   .hpos = -1, .txts = txts};
    rehash(e);
    mark_ready(e, &e->qs[e->nq - 1]);
    rc = 0;
out:
    api_unlock(e);
    kick(e);
    return rc;
}

static int post(struct tn_engine *e, uint32_t qpn, int op, const void *buf, uint64_t len,
                uint64_t wr_id, const struct tn_group *groups, uint32_t n_groups)
{
    api_lock(e);
    struct qent *qe = find(e, qpn);
    int rc = -1;
    if (!qe)
        eseterr(e, "QP %u does not exist", qpn);
    else
        rc = tn_qp_post(qe->q, op, buf, len, wr_id, groups, n_groups, api_now(e), e->err,
                        sizeof e->err);
    if (qe)
        mark_ready(e, qe);
    api_unlock(e);
    kick(e);
    return rc;
}

int tn_post_write(struct tn_engine *e, uint32_t qpn, const void *buf, uint64_t len,
                  uint64_t wr_id)
{
    return post(e, qpn, OP_WRITE_ONLY, buf, len, wr_id, NULL, 0);
}

int tn_post_write_plan(struct tn_engine *e, uint32_t qpn, const void *buf, uint64_t len,
                       uint64_t wr_id, const struct tn_group *groups, uint32_t n_groups)
{
    return post(e, qpn, OP_WRITE_ONLY, buf, len, wr_id, groups, n_groups);
}

int tn_post_send(struct tn_engine *e, uint32_t qpn, const void *buf, uint64_t len,
                 uint64_t wr_id)
{
    return post(e, qpn, OP_SEND_ONLY, buf, len, wr_id, NULL, 0);
}

int tn_set_rate(struct tn_engine *e, uint32_t qpn, double rate_bps)
{
    api_lock(e);
    struct qent *qe = find(e, qpn);
    int rc = -1;
    if (!qe)
        eseterr(e, "QP %u does not exist", qpn);
    else
        rc = tn_qp_set_rate(qe->q, rate_bps, api_now(e), e->err, sizeof e->err);
    if (qe)
        mark_ready(e, qe);
    api_unlock(e);
    kick(e);
    return rc;
}

int tn_set_fec(struct tn_engine *e, uint32_t qpn, uint32_t k, uint32_t m)
{
    api_lock(e);
    struct qent *qe = find(e, qpn);
    int rc = -1;
    if (!qe)
        eseterr(e, "QP %u does not exist", qpn);
    else
        rc = tn_qp_set_fec(qe->q, k, m, api_now(e), e->err, sizeof e->err);
    if (qe)
        mark_ready(e, qe);
    api_unlock(e);
    kick(e);
    return rc;
}

int tn_path_changed(struct tn_engine *e, uint32_t qpn)
{
    api_lock(e);
    struct qent *qe = find(e, qpn);
    int rc = -1;
    if (!qe)
        eseterr(e, "QP %u does not exist", qpn);
    else {
        rc = tn_qp_path_changed(qe->q, api_now(e));
        mark_ready(e, qe);
    }
    api_unlock(e);
    kick(e);
    return rc;
}

int tn_set_rx_delay(struct tn_engine *e, double delay_s)
{
    if (!(delay_s >= 0 && delay_s <= 10.0)) {
        eseterr(e, "delay line: delay_s=%g outside 0..10 s", delay_s);
        return -1;
    }
    api_lock(e);
    e->a.rx_delay_s = delay_s;
    api_unlock(e);
    kick(e);
    return 0;
}

int tn_qp_counters(struct tn_engine *e, uint32_t qpn, struct tn_qp_counters *out)
{
    api_lock(e);
    struct qent *qe = find(e, qpn);
    if (qe)
        tn_qp_get_counters(qe->q, out);
    else
        eseterr(e, "QP %u does not exist", qpn);
    api_unlock(e);
    return qe ? 0 : -1;
}

int tn_qp_state(struct tn_engine *e, uint32_t qpn, struct tn_qp_state *out)
{
    api_lock(e);
    struct qent *qe = find(e, qpn);
    if (qe) {
        tn_qp_get_state(qe->q, out);
        out->injected = qe->injected;
    } else {
        eseterr(e, "QP %u does not exist", qpn);
    }
    api_unlock(e);
    return qe ? 0 : -1;
}

int tn_qp_idle(struct tn_engine *e, uint32_t qpn)
{
    api_lock(e);
    struct qent *qe = find(e, qpn);
    int r = qe ? tn_qp_is_idle(qe->q) : -1;
    api_unlock(e);
    return r;
}

int tn_qp_cc(struct tn_engine *e, uint32_t qpn, struct tn_qp_cc *out)
{
    api_lock(e);
    struct qent *qe = find(e, qpn);
    if (qe)
        tn_qp_get_cc(qe->q, out);
    else
        eseterr(e, "QP %u does not exist", qpn);
    api_unlock(e);
    return qe ? 0 : -1;
}

int tn_engine_counters(struct tn_engine *e, struct tn_engine_counters *out)
{
    api_lock(e);
    *out = e->c;
    clockid_t cid;  /* the engine thread's CPU time (idle and spin cost, bench_engine) */
    struct timespec t;
    if (e->running && pthread_getcpuclockid(e->th, &cid) == 0 && clock_gettime(cid, &t) == 0)
        out->cpu_s = (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
    api_unlock(e);
    return 0;
}

/* -- step mode ---------------------------------------------------------------------- */
int tn_inject(struct tn_engine *e, uint32_t src_ip, uint16_t sport, const void *buf,
              uint32_t len, uint8_t tos, double now_s)
{
    if (len > TN_MAX_PKT)
        return -1;
    api_lock(e);
    e->step_now = now_s;
    e->c.rx_pkts++;
    receive(e, buf, len, src_ip, sport, tos, now_s);
    api_unlock(e);
    return 0;
}

double tn_step(struct tn_engine *e, double now_s)
{
    api_lock(e);
    e->step_now = now_s;
    double held = release_held(e, now_s);
    send_acks(e);
    double w = run_requesters(e, now_s, 1);
    if (held >= 0 && (w < 0 || held < w))
        w = held;
    api_unlock(e);
    return w;
}

void tn_step_clock(struct tn_engine *e, double now_s)
{
    api_lock(e);
    e->step_now = now_s;
    api_unlock(e);
}

int tn_take_output(struct tn_engine *e, struct tn_out_pkt *out, int n)
{
    api_lock(e);
    int k = n < e->ncapt ? n : e->ncapt;
    if (k > 0) {
        memcpy(out, e->capt, sizeof *out * (size_t)k);
        memmove(e->capt, e->capt + k, sizeof *out * (size_t)(e->ncapt - k));
        e->ncapt -= k;
    }
    api_unlock(e);
    return k;
}
