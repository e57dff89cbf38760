/* Loss emulation at tc clsact (ingress or egress) for kernels without netem (bcc).
 *
 * Models, chosen at run time through the "config" array (slot 0):
 *   LOSS_OFF        pass everything;
 *   LOSS_BERNOULLI  drop each matched packet with probability p_drop;
 *   LOSS_GE         Gilbert-Elliott: a good and a bad state; a packet is dropped with
 *                   loss_good / loss_bad by the current state, then the state moves
 *                   good->bad with p_gb and bad->good with p_bg (classic Gilbert:
 *                   loss_good 0, loss_bad 1, mean burst 1/p_bg, loss p_gb/(p_gb+p_bg)).
 *                   With slot_ns > 0 the chain also moves once per slot of time that
 *                   passes between packets (common/loss.py's clock): the n moves are
 *                   taken at once by the chain's n-step transition, P(bad) = pi +
 *                   (1 - pi) l^n from bad and pi (1 - l^n) from good (pi = p/(p+r),
 *                   l = 1-p-r, both precomputed in the config), l^n by squaring in
 *                   32.32 fixed point.  The clock advances one slot per packet too.
 * Probabilities are fixed point: threshold = p * 2^32 compared with a 32-bit random
 * number (as u64, so p = 1 is exact): bpf_get_prandom_u32, or with a seed an
 * xorshift64* generator kept in the state slot, so a run can be repeated exactly.  Only IPv4 is considered (ARP and the like always pass),
 * also behind the link sequence header (EtherType 0x88B5, 6 B) of switch-to-switch
 * links unless link_seq is 0; optionally only UDP, optionally one UDP destination port.
 * The EtherType is read from the frame, not skb->protocol (raw senders may not set it).
 * Counters: matched packets, drops, bursts (maximal runs of consecutive drops among
 * matched packets) and a histogram of finished burst lengths (last slot: >= 63).
 * State is one shared slot: several CPUs may race on it, which blurs burst statistics
 * only when packets of one link are spread over CPUs at the same instant.
 * Passing packets return TC_ACT_UNSPEC so later filters (the INT sink) still run.
 */
#include <uapi/linux/bpf.h>
#include <uapi/linux/if_ether.h>
#include <uapi/linux/in.h>
#include <uapi/linux/ip.h>
#include <uapi/linux/udp.h>
#include <uapi/linux/pkt_cls.h>

#define LOSS_OFF 0
#define LOSS_BERNOULLI 1
#define LOSS_GE 2
#define HIST_SLOTS 64
#define ETH_P_LINK_SEQ 0x88B5
#define LINK_SEQ_LEN 6

struct loss_config {
    __u64 p_drop;     /* Bernoulli threshold (p * 2^32) */
    __u64 p_gb;       /* GE good -> bad */
    __u64 p_bg;       /* GE bad -> good */
    __u64 loss_good;  /* GE drop threshold in the good state */
    __u64 loss_bad;   /* GE drop threshold in the bad state */
    __u32 mode;
    __u32 udp_only;   /* 1: only UDP packets are subject to loss */
    __u32 udp_dport;  /* 0: any port */
    __u32 link_seq;   /* 1: IPv4 behind a link sequence header counts too */
    __u32 seeded;     /* 1: draw from state.rng (xorshift64*) instead of the kernel */
    __u32 pad;
    __u64 slot_ns;    /* GE clock: 0 = the chain moves per packet only */
    __u64 pi_bad;     /* stationary bad share p/(p+r), as a threshold */
    __u64 lam;        /* |1 - p - r| * 2^32, below 2^32 */
    __u32 lam_neg;    /* 1: 1 - p - r < 0 */
    __u32 pad2;
};

struct loss_state {
    __u64 matched;
    __u64 dropped;
    __u64 bursts;
    __u64 bad_packets; /* matched packets seen in the bad state */
    __u32 in_bad;
    __u32 run;         /* length of the current drop run */
    __u64 rng;         /* xorshift64* state when seeded (never 0) */
    __u64 clock_ns;    /* GE clock: time up to which the chain has moved (0: not yet) */
};

BPF_ARRAY(config, struct loss_config, 1);
BPF_ARRAY(state, struct loss_state, 1);
BPF_ARRAY(burst_hist, __u64, HIST_SLOTS);

static __always_inline int chance(const struct loss_config *c, struct loss_state *st,
                                  __u64 threshold)
{
    __u32 r;
    if (c->seeded) {
        __u64 x = st->rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        st->rng = x;
        r = (x * 0x2545F4914F6CDD1DULL) >> 32;
    } else {
        r = bpf_get_prandom_u32();
    }
    return (__u64)r < threshold;
}

#define Q32_ONE (1ULL << 32)
#define CLOCK_MAX_BITS 40   /* moves taken at once: up to 2^40 slots (l^n is 0 long before) */

/* a * b in 32.32 fixed point, a <= 2^32 and b < 2^32 (no overflow) */
static __always_inline __u64 q32_mul(__u64 a, __u64 b)
{
    return (a * b) >> 32;
}

/* The chain's bad-state probability after n moves, from bad (in_bad) or good. */
static __always_inline __u64 bad_after(const struct loss_config *c, __u32 in_bad, __u64 n)
{
    if (n >> CLOCK_MAX_BITS)
        n = 1ULL << CLOCK_MAX_BITS;
    __u64 ln = Q32_ONE, base = c->lam;
    int neg = c->lam_neg && (n & 1);
    for (int i = 0; i <= CLOCK_MAX_BITS; i++) {
        if (!n)
            break;
        if (n & 1)
            ln = q32_mul(ln, base);
        base = q32_mul(base, base);
        n >>= 1;
    }
    __u64 pi = c->pi_bad, d;
    if (in_bad) {                 /* pi + (1 - pi) l^n */
        d = q32_mul(ln, Q32_ONE - pi);
        return neg ? (pi > d ? pi - d : 0) : (pi + d > Q32_ONE ? Q32_ONE : pi + d);
    }
    d = q32_mul(ln, pi);          /* pi (1 - l^n) */
    return neg ? (pi + d > Q32_ONE ? Q32_ONE : pi + d) : (pi > d ? pi - d : 0);
}

int loss_filter(struct __sk_buff *skb)
{
    __u32 zero = 0;
    struct loss_config *c = config.lookup(&zero);
    struct loss_state *st = state.lookup(&zero);
    if (!c || !st || c->mode == LOSS_OFF)
        return TC_ACT_UNSPEC;
    __be16 proto;
    if (bpf_skb_load_bytes(skb, 12, &proto, 2) < 0)
        return TC_ACT_UNSPEC;
    __u32 l3 = ETH_HLEN;
    if (proto == bpf_htons(ETH_P_LINK_SEQ) && c->link_seq) {
        if (bpf_skb_load_bytes(skb, ETH_HLEN + 4, &proto, 2) < 0)
            return TC_ACT_UNSPEC;
        l3 += LINK_SEQ_LEN;
    }
    if (proto != bpf_htons(ETH_P_IP))
        return TC_ACT_UNSPEC;
    if (c->udp_only) {
        struct iphdr ip;
        if (bpf_skb_load_bytes(skb, l3, &ip, sizeof(ip)) < 0 || ip.protocol != IPPROTO_UDP)
            return TC_ACT_UNSPEC;
        if (c->udp_dport) {
            __be16 port;
            if (bpf_skb_load_bytes(skb, l3 + ip.ihl * 4 + 2, &port, 2) < 0 ||
                bpf_ntohs(port) != c->udp_dport)
                return TC_ACT_UNSPEC;
        }
    }
    __sync_fetch_and_add(&st->matched, 1);
    int drop;
    if (c->mode == LOSS_BERNOULLI) {
        drop = chance(c, st, c->p_drop);
    } else {
        if (c->slot_ns) {
            __u64 now = bpf_ktime_get_ns(), clock = st->clock_ns;
            if (!clock)
                clock = now;
            if (now > clock) {
                __u64 n = (now - clock) / c->slot_ns;
                if (n) {
                    st->in_bad = chance(c, st, bad_after(c, st->in_bad, n));
                    clock += n * c->slot_ns;
                }
            }
            st->clock_ns = clock + c->slot_ns;
        }
        if (st->in_bad)
            __sync_fetch_and_add(&st->bad_packets, 1);
        drop = chance(c, st, st->in_bad ? c->loss_bad : c->loss_good);
        if (st->in_bad) {
            if (chance(c, st, c->p_bg))
                st->in_bad = 0;
        } else if (chance(c, st, c->p_gb)) {
            st->in_bad = 1;
        }
    }
    if (drop) {
        if (st->run == 0)
            __sync_fetch_and_add(&st->bursts, 1);
        st->run += 1;
        __sync_fetch_and_add(&st->dropped, 1);
        return TC_ACT_SHOT;
    }
    if (st->run) {
        __u32 slot = st->run < HIST_SLOTS - 1 ? st->run : HIST_SLOTS - 1;
        __u64 *h = burst_hist.lookup(&slot);
        if (h)
            __sync_fetch_and_add(h, 1);
        st->run = 0;
    }
    return TC_ACT_UNSPEC;
}
