/* The WAN delay line in C: delay, jitter, rate limit and queue between two interfaces.
 *
 * Why: the Python delay line (mininet_topos/delayline.py) costs tens of microseconds per
 * frame and tops out near 100 Mbit/s on a small machine, so a WAN experiment at Gbit/s
 * (a bandwidth-delay product of thousands of packets, where go-back-N collapses and FEC
 * pays) measured the emulator, not the endpoints.  This process applies the same model
 * per direction (mininet_topos/delayline.py's module docstring is its definition):
 *
 *     tx_end  = max(arrival, end of the previous frame's serialisation) + bits / rate
 *     deliver = tx_end + delay +/- jitter        (never before the previous frame's
 *                                                  delivery unless reorder is on)
 *
 * with frames waiting for serialisation beyond queue_pkts tail-dropped.  Loss is not
 * here: WanLink uses this line only when the loss is none or a loss backend (the eBPF
 * dropper) applies it, and the Python line otherwise (one loss model, in common/loss.py
 * and its eBPF twin).
 *
 * The process protocol is the Python line's: --a IF --b IF --params FILE --stats FILE
 * [--realtime]; SIGUSR1 writes the counters (JSON, with a "seq" that counts dumps),
 * SIGHUP re-reads the params file, SIGTERM/SIGINT stop after a last dump.  The params
 * file is lines of key=value: delay_ms, jitter_ms, rate_mbps, queue_pkts, reorder (0 or
 * 1), seed (an integer or none), loss (none only).
 *
 * Per packet: recvmmsg and sendmmsg in batches on two AF_PACKET sockets, one copy into
 * a frame of its own size, a binary heap keyed by delivery time; one thread sleeping in
 * ppoll until the next delivery (1 ns timer slack), so an idle line takes no CPU, and
 * while frames keep coming waking on a tick (--tick-us, 40 us) rather than per frame.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

#define MAX_FRAME 65536
#define BATCH 64
#define MAX_WAIT_NS 50000000LL        /* wake at least this often (signals are handled anyway) */
#define READ_BATCHES_PER_WAKE 4
#define DEFAULT_TICK_US 40            /* sleep between reads while frames keep coming */

/* ---- parameters ---------------------------------------------------------------------- */
typedef struct {
    double delay_ms, jitter_ms, rate_mbps;
    long queue_pkts;
    bool reorder;
    bool has_seed;
    unsigned long long seed;
} params_t;

static void params_default(params_t *p)
{
    *p = (params_t){.delay_ms = 10.0, .queue_pkts = 1000};
}

/* The Python WanParams.check() ranges; on error, a message naming the field. */
static bool params_check(const params_t *p, char *err, size_t n)
{
    if (!(p->delay_ms >= 0.0 && p->delay_ms <= 200.0))
        return snprintf(err, n, "delay_ms %g out of range 0..200", p->delay_ms), false;
    if (!(p->jitter_ms >= 0.0 && p->jitter_ms <= p->delay_ms))
        return snprintf(err, n, "jitter_ms %g out of range 0..delay_ms (%g)", p->jitter_ms,
                        p->delay_ms), false;
    if (!(p->rate_mbps == 0.0 || (p->rate_mbps >= 0.001 && p->rate_mbps <= 100000.0)))
        return snprintf(err, n, "rate_mbps %g out of range 0.001..100000 (or 0 for no limit)",
                        p->rate_mbps), false;
    if (p->queue_pkts < 1 || p->queue_pkts > 1000000)
        return snprintf(err, n, "queue_pkts %ld out of range 1..1000000", p->queue_pkts), false;
    return true;
}

static bool parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end)
        return false;
    *out = v;
    return true;
}

static bool parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end)
        return false;
    *out = v;
    return true;
}

/* One "key=value" setting; false with a message naming it when it is not understood. */
static bool params_set(params_t *p, const char *key, const char *val, char *err, size_t n)
{
    long l;
    if (!strcmp(key, "delay_ms") && parse_double(val, &p->delay_ms))
        return true;
    if (!strcmp(key, "jitter_ms") && parse_double(val, &p->jitter_ms))
        return true;
    if (!strcmp(key, "rate_mbps") && parse_double(val, &p->rate_mbps))
        return true;
    if (!strcmp(key, "queue_pkts") && parse_long(val, &p->queue_pkts))
        return true;
    if (!strcmp(key, "reorder") && parse_long(val, &l) && (l == 0 || l == 1)) {
        p->reorder = l;
        return true;
    }
    if (!strcmp(key, "seed")) {
        if (!strcmp(val, "none")) {
            p->has_seed = false;
            return true;
        }
        if (parse_long(val, &l)) {
            p->has_seed = true;
            p->seed = (unsigned long long)l;
            return true;
        }
    }
    if (!strcmp(key, "loss")) {
        if (!strcmp(val, "none"))
            return true;
        snprintf(err, n, "loss %s: this delay line applies no loss (use a loss backend or "
                 "the Python delay line)", val);
        return false;
    }
    snprintf(err, n, "%s=%s not understood (keys: delay_ms, jitter_ms, rate_mbps, "
             "queue_pkts, reorder, seed, loss)", key, val);
    return false;
}

static bool params_read(const char *path, params_t *out, char *err, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return snprintf(err, n, "params file %s: %s", path, strerror(errno)), false;
    params_t p;
    params_default(&p);
    char line[512], msg[384];
    int lineno = 0;
    bool ok = true;
    while (ok && fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        char *s = line + strspn(line, " \t");
        if (!*s || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, n, "params file %s line %d: expected key=value", path, lineno);
            ok = false;
            break;
        }
        *eq = 0;
        if (!params_set(&p, s, eq + 1, msg, sizeof msg)) {
            snprintf(err, n, "params file %s line %d: %s", path, lineno, msg);
            ok = false;
        }
    }
    fclose(f);
    if (ok && !params_check(&p, msg, sizeof msg)) {
        snprintf(err, n, "params file %s: %s", path, msg);
        ok = false;
    }
    if (ok)
        *out = p;
    return ok;
}

/* ---- one direction's model ----------------------------------------------------------- */
typedef struct {
    int64_t deliver_ns;
    uint64_t seq;
    uint32_t len;
    uint8_t *data;
} frame_t;

typedef struct {
    unsigned long long rx_pkts, rx_bytes, tx_pkts, tx_bytes, lost, queue_drops, tx_errors;
    unsigned long long max_backlog_pkts, late_max_us, late_over_1ms_pkts;
} stats_t;

typedef struct {
    params_t params;
    int64_t delay_ns, jitter_ns;
    double ns_per_byte;
    int64_t tx_free_ns, last_deliver_ns;
    int64_t *backlog;              /* ring of serialisation end times, capacity queue_pkts */
    long bl_head, bl_len, bl_cap;
    frame_t *heap;                 /* min-heap on (deliver_ns, seq) */
    size_t heap_len, heap_cap;
    uint64_t seq;
    uint64_t rng;
    stats_t st;
} direction_t;

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s)
{
    return (double)(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);
}

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q && n)
        die("delay line: out of memory (%zu bytes)", n);
    return q;
}

/* New parameters apply to frames arriving from now on; frames in flight keep theirs. */
static void dir_set_params(direction_t *d, const params_t *p)
{
    d->params = *p;
    d->delay_ns = (int64_t)(p->delay_ms * 1e6);
    d->jitter_ns = (int64_t)(p->jitter_ms * 1e6);
    d->ns_per_byte = p->rate_mbps > 0 ? 8e3 / p->rate_mbps : 0.0;
    if (p->queue_pkts != d->bl_cap) {       /* keep the newest tx_end times that fit */
        int64_t *nb = xrealloc(NULL, sizeof *nb * (size_t)p->queue_pkts);
        long keep = d->bl_len < p->queue_pkts ? d->bl_len : p->queue_pkts;
        for (long i = 0; i < keep; i++)
            nb[i] = d->backlog[(d->bl_head + d->bl_len - keep + i) % d->bl_cap];
        free(d->backlog);
        d->backlog = nb;
        d->bl_head = 0;
        d->bl_len = keep;
        d->bl_cap = p->queue_pkts;
    }
}

static bool frame_before(const frame_t *a, const frame_t *b)
{
    return a->deliver_ns < b->deliver_ns || (a->deliver_ns == b->deliver_ns && a->seq < b->seq);
}

static void heap_push(direction_t *d, frame_t f)
{
    if (d->heap_len == d->heap_cap) {
        d->heap_cap = d->heap_cap ? 2 * d->heap_cap : 1024;
        d->heap = xrealloc(d->heap, sizeof *d->heap * d->heap_cap);
    }
    size_t i = d->heap_len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!frame_before(&f, &d->heap[parent]))
            break;
        d->heap[i] = d->heap[parent];
        i = parent;
    }
    d->heap[i] = f;
}

static frame_t heap_pop(direction_t *d)
{
    frame_t top = d->heap[0], last = d->heap[--d->heap_len];
    size_t i = 0, n = d->heap_len;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && frame_before(&d->heap[c + 1], &d->heap[c]))
            c++;
        if (!frame_before(&d->heap[c], &last))
            break;
        d->heap[i] = d->heap[c];
        i = c;
    }
    if (n)
        d->heap[i] = last;
    return top;
}

/* A frame arrives at now_ns: schedule it (a copy) or count it as a tail drop. */
static void dir_arrive(direction_t *d, int64_t now_ns, const uint8_t *data, uint32_t len)
{
    stats_t *st = &d->st;
    st->rx_pkts++;
    st->rx_bytes += len;
    int64_t tx_end = now_ns;
    if (d->ns_per_byte > 0) {
        while (d->bl_len && d->backlog[d->bl_head] <= now_ns) {
            d->bl_head = (d->bl_head + 1) % d->bl_cap;
            d->bl_len--;
        }
        if (d->bl_len >= d->bl_cap) {
            st->queue_drops++;
            return;
        }
        int64_t start = now_ns > d->tx_free_ns ? now_ns : d->tx_free_ns;
        tx_end = start + (int64_t)(len * d->ns_per_byte);
        d->tx_free_ns = tx_end;
        d->backlog[(d->bl_head + d->bl_len) % d->bl_cap] = tx_end;
        d->bl_len++;
        if ((unsigned long long)d->bl_len > st->max_backlog_pkts)
            st->max_backlog_pkts = (unsigned long long)d->bl_len;
    }
    int64_t deliver = tx_end + d->delay_ns;
    if (d->jitter_ns)
        deliver += (int64_t)((2.0 * uniform01(&d->rng) - 1.0) * (double)d->jitter_ns);
    if (!d->params.reorder) {
        if (deliver < d->last_deliver_ns)
            deliver = d->last_deliver_ns;
        d->last_deliver_ns = deliver;
    }
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        die("delay line: out of memory");
    memcpy(copy, data, len);
    heap_push(d, (frame_t){.deliver_ns = deliver, .seq = d->seq++, .len = len, .data = copy});
}

/* ---- checksums a local stack left to offload ---------------------------------------- */
/* A frame from a local stack with checksum offload carries only the pseudo-header sum
 * (TP_STATUS_CSUMNOTREADY); forwarded as is, the receiver would drop it.  As in the
 * Python line: the one's complement sum of the whole IPv4 TCP/UDP segment. */
static void complete_checksum(uint8_t *f, uint32_t len)
{
    if (len < 34 || f[12] != 0x08 || f[13] != 0x00)
        return;
    uint32_t ihl = (f[14] & 0x0f) * 4u, start = 14 + ihl;
    uint32_t end = 14 + ((uint32_t)f[16] << 8 | f[17]);
    uint8_t proto = f[23];
    uint32_t off = proto == 6 ? 16 : proto == 17 ? 6 : 0;
    if (!off || end > len || start + off + 2 > end)
        return;
    uint64_t sum = 0;
    for (uint32_t i = start; i + 1 < end; i += 2)
        sum += (uint32_t)f[i] << 8 | f[i + 1];
    if ((end - start) & 1)
        sum += (uint32_t)f[end - 1] << 8;
    uint32_t total = (uint32_t)(sum % 0xffff);
    uint16_t csum = (uint16_t)~total;
    if (proto == 17 && csum == 0)
        csum = 0xffff;
    f[start + off] = csum >> 8;
    f[start + off + 1] = csum & 0xff;
}

/* ---- the process ----------------------------------------------------------------------- */
static volatile sig_atomic_t g_stop, g_dump, g_reload;

static void on_signal(int sig)
{
    if (sig == SIGTERM || sig == SIGINT)
        g_stop = 1;
    else if (sig == SIGUSR1)
        g_dump = 1;
    else if (sig == SIGHUP)
        g_reload = 1;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int open_iface(const char *ifname)
{
    unsigned idx = if_nametoindex(ifname);
    if (!idx)
        die("delay line: cannot open interface %s: %s", ifname, strerror(errno));
    /* blocking: reads pass MSG_DONTWAIT, and a send never fails for a full buffer */
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    if (fd < 0)
        die("delay line: cannot open interface %s: %s", ifname, strerror(errno));
    int one = 1, buf = 16 << 20;
    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
    setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof one);
    /* as root the FORCE variants pass net.core.[rw]mem_max; otherwise the plain ones */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf))
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf))
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
                              .sll_ifindex = (int)idx};
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll))
        die("delay line: cannot open interface %s: %s", ifname, strerror(errno));
    return fd;
}

typedef struct {
    const char *a_if, *b_if, *params_path, *stats_path;
    bool realtime, is_realtime;
    direction_t dir[2];            /* 0: "ab" (read on a, sent on b), 1: "ba" */
    int fd[2];                     /* 0: a, 1: b */
    unsigned long long dumps;
} line_t;

static void write_stats_dir(FILE *f, const char *name, const stats_t *s)
{
    fprintf(f, ", \"%s\": {\"rx_pkts\": %llu, \"rx_bytes\": %llu, \"tx_pkts\": %llu, "
            "\"tx_bytes\": %llu, \"lost\": %llu, \"queue_drops\": %llu, \"tx_errors\": %llu, "
            "\"max_backlog_pkts\": %llu, \"late_max_us\": %llu, \"late_over_1ms_pkts\": %llu}",
            name, s->rx_pkts, s->rx_bytes, s->tx_pkts, s->tx_bytes, s->lost, s->queue_drops,
            s->tx_errors, s->max_backlog_pkts, s->late_max_us, s->late_over_1ms_pkts);
}

/* The counters as the Python line writes them (atomically: a temporary file renamed). */
static void dump_stats(line_t *L)
{
    if (!L->stats_path) {
        L->dumps++;
        return;
    }
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", L->stats_path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "delay line: cannot write %s: %s\n", tmp, strerror(errno));
        return;
    }
    const params_t *p = &L->dir[0].params;
    char seed[32] = "null";
    if (p->has_seed)
        snprintf(seed, sizeof seed, "%llu", p->seed);
    fprintf(f, "{\"seq\": %llu, \"pid\": %d, \"realtime\": %s, \"engine\": \"native\", "
            "\"params\": {\"delay_ms\": %.17g, \"jitter_ms\": %.17g, \"rate_mbps\": %.17g, "
            "\"loss\": {\"model\": \"none\"}, \"queue_pkts\": %ld, \"reorder\": %s, "
            "\"seed\": %s}",
            L->dumps, (int)getpid(), L->is_realtime ? "true" : "false", p->delay_ms,
            p->jitter_ms, p->rate_mbps, p->queue_pkts, p->reorder ? "true" : "false", seed);
    write_stats_dir(f, "ab", &L->dir[0].st);
    write_stats_dir(f, "ba", &L->dir[1].st);
    fputs("}\n", f);
    if (fclose(f) || rename(tmp, L->stats_path)) {
        fprintf(stderr, "delay line: cannot write %s: %s\n", L->stats_path, strerror(errno));
        unlink(tmp);
        return;
    }
    L->dumps++;
}

static struct mmsghdr g_rx[BATCH];
static struct iovec g_rx_iov[BATCH];
static uint8_t g_rx_buf[BATCH][MAX_FRAME];
static uint8_t g_rx_ctl[BATCH][CMSG_SPACE(sizeof(struct tpacket_auxdata))];

/* Read what is waiting on fd into direction d (a bounded number of batches, so the
 * other direction and the due sends are not starved). */
static int read_frames(line_t *L, int side)
{
    direction_t *d = &L->dir[side];
    int total = 0;
    for (int b = 0; b < READ_BATCHES_PER_WAKE; b++) {
        for (int i = 0; i < BATCH; i++) {
            g_rx_iov[i] = (struct iovec){g_rx_buf[i], MAX_FRAME};
            g_rx[i].msg_hdr = (struct msghdr){.msg_iov = &g_rx_iov[i], .msg_iovlen = 1,
                                              .msg_control = g_rx_ctl[i],
                                              .msg_controllen = sizeof g_rx_ctl[i]};
        }
        int n = recvmmsg(L->fd[side], g_rx, BATCH, MSG_DONTWAIT, NULL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return total;
            die("delay line: interface %s is gone (%s); stopping",
                side ? L->b_if : L->a_if, strerror(errno));
        }
        int64_t t = now_ns();
        for (int i = 0; i < n; i++) {
            struct msghdr *mh = &g_rx[i].msg_hdr;
            uint32_t len = g_rx[i].msg_len;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
                if (c->cmsg_level == SOL_PACKET && c->cmsg_type == PACKET_AUXDATA) {
                    struct tpacket_auxdata aux;
                    memcpy(&aux, CMSG_DATA(c), sizeof aux);
                    if (aux.tp_status & TP_STATUS_CSUMNOTREADY)
                        complete_checksum(g_rx_buf[i], len);
                }
            }
            dir_arrive(d, t, g_rx_buf[i], len);
        }
        total += n;
        if (n < BATCH)
            return total;
    }
    return total;
}

/* Send direction d's frames that are due, in delivery order, in batches.  A frame the
 * outgoing interface refuses (ENOBUFS: dropped by a tc program at its egress, such as
 * the eBPF loss emulator, or by a full backlog; EMSGSIZE; the link down) is counted in
 * tx_errors and not resent, as the Python line does: a drop must stay a drop.
 * sendmmsg reports such a refusal inside a batch only as a short count (the error of
 * the refused frame is not returned), so a short count means the next frame was
 * refused; the sockets block on sends, so a full send buffer is never the reason. */
static void send_due(line_t *L, int side, int64_t now)
{
    direction_t *d = &L->dir[side];
    int out = L->fd[1 - side];
    if (!d->heap_len || d->heap[0].deliver_ns > now)
        return;
    int64_t late_us = (now - d->heap[0].deliver_ns) / 1000;
    if ((unsigned long long)late_us > d->st.late_max_us)
        d->st.late_max_us = (unsigned long long)late_us;
    bool late = late_us > 1000;
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    frame_t batch[BATCH];
    while (d->heap_len && d->heap[0].deliver_ns <= now) {
        int n = 0;
        while (n < BATCH && d->heap_len && d->heap[0].deliver_ns <= now) {
            batch[n] = heap_pop(d);
            iov[n] = (struct iovec){batch[n].data, batch[n].len};
            msgs[n] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[n], .msg_iovlen = 1}};
            n++;
        }
        if (late)
            d->st.late_over_1ms_pkts += (unsigned long long)n;
        int done = 0;
        while (done < n) {
            int r = sendmmsg(out, msgs + done, (unsigned)(n - done), 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0 && errno != ENOBUFS && errno != EMSGSIZE && errno != ENETDOWN
                && errno != ENXIO)
                die("delay line: send on %s: %s", side ? L->a_if : L->b_if, strerror(errno));
            int sent = r > 0 ? r : 0;
            for (int i = done; i < done + sent; i++) {
                d->st.tx_pkts++;
                d->st.tx_bytes += batch[i].len;
            }
            done += sent;
            if (done < n) {
                d->st.tx_errors++;     /* the frame after the last one sent was refused */
                done++;
            }
        }
        for (int i = 0; i < n; i++)
            free(batch[i].data);
    }
}

static void usage(FILE *f)
{
    fputs("usage: delayline --a IF --b IF [--params FILE] [--stats FILE] [--realtime]\n"
          "                 [--delay-ms MS] [--jitter-ms MS] [--rate-mbps MBPS]\n"
          "                 [--queue-pkts N] [--reorder] [--seed N] [--tick-us US]\n"
          "--tick-us: while frames keep coming, read and send every US microseconds\n"
          "(default 40; 0: wake for every frame, more CPU, less lateness)\n"
          "Forward frames between two interfaces with WAN delay, jitter and a rate limit\n"
          "(the native twin of python -m mininet_topos.delayline; no loss: see the README).\n"
          "example: delayline --a wana --b wanb --delay-ms 10 --rate-mbps 1000\n", f);
}

int main(int argc, char **argv)
{
    line_t L = {0};
    int64_t tick_ns = DEFAULT_TICK_US * 1000;
    params_t p;
    params_default(&p);
    char err[512];
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(opt, "--realtime")) {
            L.realtime = true;
            continue;
        }
        if (!strcmp(opt, "--reorder")) {
            p.reorder = true;
            continue;
        }
        if (i + 1 >= argc) {
            usage(stderr);
            die("%s needs a value", opt);
        }
        const char *val = argv[++i];
        if (!strcmp(opt, "--a"))
            L.a_if = val;
        else if (!strcmp(opt, "--tick-us")) {
            long us;
            if (!parse_long(val, &us) || us < 0 || us > 1000) {
                usage(stderr);
                die("--tick-us %s out of range 0..1000", val);
            }
            tick_ns = us * 1000;
        }
        else if (!strcmp(opt, "--b"))
            L.b_if = val;
        else if (!strcmp(opt, "--params"))
            L.params_path = val;
        else if (!strcmp(opt, "--stats"))
            L.stats_path = val;
        else if (!strncmp(opt, "--", 2)) {
            char key[64];
            snprintf(key, sizeof key, "%s", opt + 2);
            for (char *c = key; *c; c++)
                if (*c == '-')
                    *c = '_';
            if (!params_set(&p, key, val, err, sizeof err)) {
                usage(stderr);
                die("%s", err);
            }
        } else {
            usage(stderr);
            die("unexpected argument %s", opt);
        }
    }
    if (!L.a_if || !L.b_if) {
        usage(stderr);
        die("--a and --b are required");
    }
    if (L.params_path && !params_read(L.params_path, &p, err, sizeof err))
        die("%s", err);
    if (!params_check(&p, err, sizeof err))
        die("%s", err);

    sigset_t block, run_mask;
    sigemptyset(&block);
    int sigs[] = {SIGTERM, SIGINT, SIGUSR1, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction sa = {.sa_handler = on_signal};
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
        sigaddset(&block, sigs[i]);
    }
    /* signals are taken only inside ppoll, so none is lost between a check and a sleep */
    sigprocmask(SIG_BLOCK, &block, &run_mask);
    if (L.realtime) {
        struct sched_param sp = {.sched_priority = 10};
        L.is_realtime = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
    }
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

    L.fd[0] = open_iface(L.a_if);
    L.fd[1] = open_iface(L.b_if);
    uint64_t seed_state = p.has_seed ? p.seed : (uint64_t)now_ns() ^ (uint64_t)getpid();
    for (int s = 0; s < 2; s++) {
        L.dir[s].rng = splitmix64(&seed_state);
        dir_set_params(&L.dir[s], &p);
    }
    dump_stats(&L);                /* also tells the parent we are ready */

    struct pollfd pfd[2] = {{.fd = L.fd[0], .events = POLLIN}, {.fd = L.fd[1], .events = POLLIN}};
    /* Two ways to sleep.  Idle (nothing arrived at the last wake-up): in ppoll on both
     * sockets until the next delivery, so the first frame is taken at once.  Busy (frames
     * arrived): a fixed tick without the sockets, then read both; on a stream of frames
     * that wakes tick_ns apart instead of once per frame (each wake-up of a sleeping
     * reader costs the sender's side too), at the price of arrival and delivery times
     * up to one tick late (reported in late_max_us). */
    bool busy = false;
    while (!g_stop) {
        int64_t t = now_ns(), wait = busy ? tick_ns : MAX_WAIT_NS;
        for (int s = 0; s < 2 && !busy; s++)
            if (L.dir[s].heap_len) {
                int64_t due = L.dir[s].heap[0].deliver_ns - t;
                if (due < wait)
                    wait = due < 0 ? 0 : due;
            }
        struct timespec ts = {.tv_sec = wait / 1000000000LL, .tv_nsec = wait % 1000000000LL};
        int r = ppoll(busy ? NULL : pfd, busy ? 0 : 2, &ts, &run_mask);
        if (r < 0 && errno != EINTR)
            die("delay line: ppoll: %s", strerror(errno));
        int got = 0;
        if (busy) {
            got = read_frames(&L, 0) + read_frames(&L, 1);
        } else if (r > 0) {
            for (int s = 0; s < 2; s++) {
                if (pfd[s].revents & (POLLERR | POLLNVAL | POLLHUP))
                    die("delay line: interface %s is gone; stopping", s ? L.b_if : L.a_if);
                if (pfd[s].revents & POLLIN)
                    got += read_frames(&L, s);
            }
        }
        busy = got > 0 && tick_ns > 0;
        t = now_ns();
        send_due(&L, 0, t);
        send_due(&L, 1, t);
        if (g_reload) {
            g_reload = 0;
            if (L.params_path) {
                params_t np;
                if (params_read(L.params_path, &np, err, sizeof err)) {
                    dir_set_params(&L.dir[0], &np);
                    dir_set_params(&L.dir[1], &np);
                } else {
                    /* keep forwarding with the parameters in force */
                    fprintf(stderr, "delay line: SIGHUP: %s (parameters unchanged)\n", err);
                }
            }
            g_dump = 1;
        }
        if (g_dump) {
            g_dump = 0;
            dump_stats(&L);
        }
    }
    dump_stats(&L);
    close(L.fd[0]);
    close(L.fd[1]);
    return 0;
}
