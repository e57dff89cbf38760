/* The hop and flow table updates of controller/int/state.py, one native pass per
 * receive round.  Built by controller/int/native_tables.py with gcc at first use.
 *
 * Python keeps the grouping (lexsort) and the key -> slot lookup (SlotMap) and
 * resets new slots; these functions do everything after that, record by record,
 * with exactly the arithmetic of the numpy path (tests/controller_int/
 * test_native_tables.py compares the two on random batches).
 *
 * Records are numpy structured arrays (packed: fields may be unaligned), read at
 * the byte offsets Python passes in; table columns are passed as an array of
 * pointers in the order of the HT_* / FT_* enums below.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#define RD(T, p, off) ({ T v_; memcpy(&v_, (const char *)(p) + (off), sizeof v_); v_; })

/* HOP_DTYPE field offsets, in this order */
enum { HO_SAMPLE, HO_HOP_INDEX, HO_FIELDS, HO_NODE_ID, HO_EGRESS_PORT, HO_HOP_LATENCY,
       HO_QUEUE_PKTS, HO_EGRESS_TS, HO_TX_BYTES, HO_QUEUE_BYTES, HO_LINE_RATE, HO_N };
/* REPORT_DTYPE field offsets */
enum { SO_ARRIVAL, SO_PSN, SO_HAS_BTH, SO_HOP_COUNT, SO_N };

/* HopTable columns */
enum { HT_QLEN_BYTES, HT_QLEN_PKTS, HT_TX_BYTES, HT_HAS_TX, HT_TX_RATE, HT_LINE_RATE,
       HT_HOP_LATENCY, HT_EGRESS_TS, HT_LAST_UPDATE, HT_SAMPLES, HT_WRITE_POS,
       HT_RING_TS, HT_RING_QB, HT_RING_QP, HT_RING_RATE, HT_RING_LAT, HT_N };

/* FlowTable columns */
enum { FT_HOP_COUNT, FT_PATH_NODE, FT_PATH_PORT, FT_PATH_SLOT, FT_SAMPLES, FT_LAST_PSN,
       FT_PATH_CHANGES, FT_LAST_UPDATE, FT_WRITE_POS, FT_RING_ARRIVAL, FT_RING_PSN,
       FT_RING_MAXQ, FT_RING_LAT, FT_N };

#define MAX_PATH_HOPS 16
#define PF 8   /* flow_update's prefetch distance, in samples */

/* Hop records sorted by (key, egress ts): ``order`` (n), groups starting at
 * ``starts`` (ng) with slots ``gslot`` and ``gnew``; writes each record's slot to
 * ``out`` (by original index). */
void hop_update(const char *hops, int64_t isz, const int64_t *off, const int64_t *arrival,
                const int64_t *order, int64_t n, const int64_t *starts, const int64_t *gslot,
                const uint8_t *gnew, int64_t ng, void **col, int64_t depth,
                uint32_t f_tx_bytes, uint32_t f_egress_ts, uint32_t f_queue_bytes,
                uint32_t f_queue, uint32_t f_line_rate, uint32_t f_hop_latency,
                int64_t *out)
{
    uint32_t *qlen_bytes = col[HT_QLEN_BYTES], *qlen_pkts = col[HT_QLEN_PKTS];
    uint32_t *tx_bytes = col[HT_TX_BYTES];
    uint8_t *has_tx_t = col[HT_HAS_TX];
    double *tx_rate = col[HT_TX_RATE];
    uint64_t *line_rate = col[HT_LINE_RATE], *hop_lat = col[HT_HOP_LATENCY];
    uint64_t *egress_ts = col[HT_EGRESS_TS];
    int64_t *last_update = col[HT_LAST_UPDATE];
    uint64_t *samples = col[HT_SAMPLES], *write_pos = col[HT_WRITE_POS];
    uint64_t *ring_ts = col[HT_RING_TS];
    uint32_t *ring_qb = col[HT_RING_QB], *ring_qp = col[HT_RING_QP];
    double *ring_rate = col[HT_RING_RATE];
    uint64_t *ring_lat = col[HT_RING_LAT];
    const uint64_t d = (uint64_t)depth;

    for (int64_t g = 0; g < ng; g++) {
        int64_t a = starts[g], b = g + 1 < ng ? starts[g + 1] : n;
        int64_t s = gslot[g];
        uint32_t prev_tx = tx_bytes[s];
        uint64_t prev_ts = egress_ts[s];
        int prev_ok = has_tx_t[s] != 0;
        double newest_rate = NAN;
        uint64_t wp = write_pos[s];
        for (int64_t i = a; i < b; i++) {
            int64_t r = order[i];
            const char *h = hops + r * isz;
            uint16_t fl = RD(uint16_t, h, off[HO_FIELDS]);
            uint64_t ts = RD(uint64_t, h, off[HO_EGRESS_TS]);
            uint32_t tx = RD(uint32_t, h, off[HO_TX_BYTES]);
            int has_tx = (fl & f_tx_bytes) && (fl & f_egress_ts);
            double rate = NAN;
            if (has_tx && prev_ok && ts > prev_ts) {
                uint64_t dbytes = ((uint64_t)tx - (uint64_t)prev_tx) & 0xFFFFFFFFull;
                rate = (double)dbytes * 8e6 / (double)(ts - prev_ts);
                newest_rate = rate;
            }
            prev_tx = tx;
            prev_ts = ts;
            prev_ok = has_tx;
            uint64_t p = (wp + (uint64_t)(i - a)) % d;
            ring_ts[s * depth + p] = ts;
            ring_qb[s * depth + p] = RD(uint32_t, h, off[HO_QUEUE_BYTES]);
            ring_qp[s * depth + p] = RD(uint32_t, h, off[HO_QUEUE_PKTS]);
            ring_rate[s * depth + p] = rate;
            ring_lat[s * depth + p] = (uint64_t)RD(uint32_t, h, off[HO_HOP_LATENCY]) * 1000u;
            out[r] = s;
        }
        /* latest values from the group's last record, unless it is a late sample */
        int64_t rl = order[b - 1];
        const char *h = hops + rl * isz;
        last_update[s] = arrival[rl];
        samples[s] += (uint64_t)(b - a);
        uint16_t fl = RD(uint16_t, h, off[HO_FIELDS]);
        uint64_t ts = RD(uint64_t, h, off[HO_EGRESS_TS]);
        if (gnew[g] || !(fl & f_egress_ts) || ts >= egress_ts[s]) {
            if (fl & f_queue_bytes) qlen_bytes[s] = RD(uint32_t, h, off[HO_QUEUE_BYTES]);
            if (fl & f_queue) qlen_pkts[s] = RD(uint32_t, h, off[HO_QUEUE_PKTS]);
            if (fl & f_line_rate)
                line_rate[s] = (uint64_t)RD(uint32_t, h, off[HO_LINE_RATE]) * 1000000u;
            if (fl & f_hop_latency)
                hop_lat[s] = (uint64_t)RD(uint32_t, h, off[HO_HOP_LATENCY]) * 1000u;
            if (fl & f_egress_ts) egress_ts[s] = ts;
            if ((fl & f_tx_bytes) && (fl & f_egress_ts)) {
                tx_bytes[s] = RD(uint32_t, h, off[HO_TX_BYTES]);
                has_tx_t[s] = 1;
            }
        }
        if (!isnan(newest_rate)) tx_rate[s] = newest_rate;
        write_pos[s] = wp + (uint64_t)(b - a);
    }
}

/* Samples (n) with their hop records (nh); ``inv`` maps a sample to its flow group
 * (nu groups, slots ``gslot``, ``gnew``); ``hop_slot`` is each hop record's HopTable
 * slot.  Scratch: ``maxq`` (n u32, zeroed), ``lat`` (n f64, zeroed), ``last_idx`` and
 * ``last_h`` (nu i64, -1).  Writes each sample's slot to ``out``. */
int flow_update(const char *smp, int64_t ssz, const int64_t *soff, int64_t n,
                const char *hops, int64_t hsz, const int64_t *hoff, int64_t nh,
                const int64_t *hop_slot, const int64_t *inv, const int64_t *gslot,
                const uint8_t *gnew, int64_t nu, void **col, int64_t depth,
                uint32_t *maxq, double *lat, int64_t *last_idx, int64_t *last_h,
                int64_t *out)
{
    uint8_t *hop_count = col[FT_HOP_COUNT];
    uint32_t *path_node = col[FT_PATH_NODE];
    uint16_t *path_port = col[FT_PATH_PORT];
    int64_t *path_slot = col[FT_PATH_SLOT];
    uint64_t *samples = col[FT_SAMPLES];
    uint32_t *last_psn = col[FT_LAST_PSN], *path_changes = col[FT_PATH_CHANGES];
    int64_t *last_update = col[FT_LAST_UPDATE];
    uint64_t *write_pos = col[FT_WRITE_POS];
    int64_t *ring_arr = col[FT_RING_ARRIVAL];
    uint32_t *ring_psn = col[FT_RING_PSN], *ring_maxq = col[FT_RING_MAXQ];
    uint64_t *ring_lat = col[FT_RING_LAT];
    const uint64_t d = (uint64_t)depth;

    for (int64_t j = 0; j < nh; j++) {
        const char *h = hops + j * hsz;
        uint32_t s = RD(uint32_t, h, hoff[HO_SAMPLE]);
        if (s >= (uint64_t)n) return -1;
        uint32_t q = RD(uint32_t, h, hoff[HO_QUEUE_BYTES]);
        if (q > maxq[s]) maxq[s] = q;
        lat[s] += (double)RD(uint32_t, h, hoff[HO_HOP_LATENCY]);
    }
    for (int64_t i = 0; i < n; i++) {
        /* the flows' rows are random accesses over the whole table: ask for them
         * ahead (the counter and sample count 2*PF samples ahead, the ring cells
         * PF ahead, once the counter is in), so their cache misses overlap */
        if (i + 2 * PF < n) {
            int64_t s2 = gslot[inv[i + 2 * PF]];
            __builtin_prefetch(&write_pos[s2], 1);
            __builtin_prefetch(&samples[s2], 1);
        }
        if (i + PF < n) {
            int64_t s1 = gslot[inv[i + PF]];
            uint64_t c = s1 * depth + write_pos[s1] % d;
            __builtin_prefetch(&ring_arr[c], 1);
            __builtin_prefetch(&ring_psn[c], 1);
            __builtin_prefetch(&ring_maxq[c], 1);
            __builtin_prefetch(&ring_lat[c], 1);
        }
        const char *x = smp + i * ssz;
        int64_t g = inv[i], s = gslot[g];
        uint64_t p = write_pos[s] % d;
        write_pos[s] += 1;
        ring_arr[s * depth + p] = RD(int64_t, x, soff[SO_ARRIVAL]);
        ring_psn[s * depth + p] = RD(uint32_t, x, soff[SO_PSN]);
        ring_maxq[s * depth + p] = maxq[i];
        ring_lat[s * depth + p] = (uint64_t)(lat[i] * 1000.0);
        samples[s] += 1;
        last_idx[g] = i;
        if (RD(uint8_t, x, soff[SO_HOP_COUNT]) > 0) last_h[g] = i;
        out[i] = s;
    }
    /* the new path of each flow: the hop records of its last sample with hops */
    uint32_t *nn = calloc((size_t)nu * MAX_PATH_HOPS, sizeof *nn);
    uint16_t *np_ = calloc((size_t)nu * MAX_PATH_HOPS, sizeof *np_);
    int64_t *ns = malloc((size_t)nu * MAX_PATH_HOPS * sizeof *ns);
    if (!nn || !np_ || !ns) { free(nn); free(np_); free(ns); return -2; }
    for (int64_t k = 0; k < nu * MAX_PATH_HOPS; k++) ns[k] = -1;
    for (int64_t j = 0; j < nh; j++) {
        const char *h = hops + j * hsz;
        uint32_t s = RD(uint32_t, h, hoff[HO_SAMPLE]);
        uint8_t hi = RD(uint8_t, h, hoff[HO_HOP_INDEX]);
        int64_t g = inv[s];
        if (last_h[g] != (int64_t)s || hi >= MAX_PATH_HOPS) continue;
        nn[g * MAX_PATH_HOPS + hi] = RD(uint32_t, h, hoff[HO_NODE_ID]);
        np_[g * MAX_PATH_HOPS + hi] = RD(uint16_t, h, hoff[HO_EGRESS_PORT]);
        ns[g * MAX_PATH_HOPS + hi] = hop_slot[j];
    }
    for (int64_t g = 0; g < nu; g++) {
        if (g + PF < nu) {
            int64_t s1 = gslot[g + PF];
            __builtin_prefetch(&last_update[s1], 1);
            __builtin_prefetch(&last_psn[s1], 1);
            __builtin_prefetch(&hop_count[s1], 1);
            __builtin_prefetch(path_node + s1 * MAX_PATH_HOPS, 1);
            __builtin_prefetch(path_port + s1 * MAX_PATH_HOPS, 1);
            __builtin_prefetch(path_slot + s1 * MAX_PATH_HOPS, 1);
            __builtin_prefetch(path_slot + s1 * MAX_PATH_HOPS + 8, 1);
        }
        int64_t s = gslot[g];
        const char *x = smp + last_idx[g] * ssz;
        last_update[s] = RD(int64_t, x, soff[SO_ARRIVAL]);
        if (RD(uint8_t, x, soff[SO_HAS_BTH])) last_psn[s] = RD(uint32_t, x, soff[SO_PSN]);
        if (last_h[g] < 0) continue;
        uint32_t *rn = path_node + s * MAX_PATH_HOPS;
        uint16_t *rp = path_port + s * MAX_PATH_HOPS;
        if (!gnew[g] && (memcmp(rn, nn + g * MAX_PATH_HOPS, MAX_PATH_HOPS * sizeof *rn)
                         || memcmp(rp, np_ + g * MAX_PATH_HOPS, MAX_PATH_HOPS * sizeof *rp)))
            path_changes[s] += 1;
        memcpy(rn, nn + g * MAX_PATH_HOPS, MAX_PATH_HOPS * sizeof *rn);
        memcpy(rp, np_ + g * MAX_PATH_HOPS, MAX_PATH_HOPS * sizeof *rp);
        memcpy(path_slot + s * MAX_PATH_HOPS, ns + g * MAX_PATH_HOPS,
               MAX_PATH_HOPS * sizeof *ns);
        uint8_t hc = RD(uint8_t, smp + last_h[g] * ssz, soff[SO_HOP_COUNT]);
        hop_count[s] = hc < MAX_PATH_HOPS ? hc : MAX_PATH_HOPS;
    }
    free(nn); free(np_); free(ns);
    return 0;
}

/* SlotMap's probe (controller/int/slots.py), key by key: the slot of each of the n
 * keys (words w of key i at keys[w * n + i]) or -1, and for absent keys the first
 * free (empty or tombstone) table position of its linear probe sequence.  The hash
 * and the probe order are slots.py's, so both paths find the same positions. */
void slot_probe(const uint64_t *keys, int64_t n, int64_t width, const uint64_t *tkeys,
                const int64_t *tslot, int64_t size, int64_t *slots, int64_t *free_at)
{
    const uint64_t mask = (uint64_t)size - 1;
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = keys[i] * 0x9E3779B97F4A7C15ull;
        for (int64_t w = 1; w < width; w++)
            h = (h ^ (h >> 31)) + keys[w * n + i] * 0xC2B2AE3D27D4EB4Full;
        h ^= h >> 29;
        uint64_t pos = h & mask;
        int64_t slot = -1, free = -1;
        for (uint64_t step = 0; step <= mask; step++) {
            int64_t ts = tslot[pos];
            if (ts >= 0) {
                int64_t w = 0;
                while (w < width && tkeys[w * size + (int64_t)pos] == keys[w * n + i])
                    w++;
                if (w == width) {
                    slot = ts;
                    break;
                }
            } else {
                if (free < 0)
                    free = (int64_t)pos;
                if (ts == -1)       /* empty: the key is absent */
                    break;
            }
            pos = (pos + 1) & mask;
        }
        slots[i] = slot;
        free_at[i] = free;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* HopTable.update's grouping: the records' keys (node ID << 16 | egress port) and
 * their order by (key, egress ts), stable, as numpy's lexsort gives it.  Few
 * distinct keys and egress timestamps rising within a hop are the rule: distinct
 * keys through a small hash table, a counting sort by key rank, then a check that
 * every hop's timestamps do not fall.  Returns the number of distinct keys (uniq,
 * ascending; starts: first position of each in order), -1 when a hop's timestamps
 * fall (the caller sorts with lexsort) or -2 without memory. */
int64_t hop_group(const char *hops, int64_t isz, const int64_t *off, int64_t n,
                  int64_t *order, int64_t *starts, uint64_t *uniq)
{
    int64_t size = 16;
    while (size < 2 * n)
        size <<= 1;
    uint64_t *tk = malloc((size_t)size * sizeof *tk);
    int64_t *tg = malloc((size_t)size * sizeof *tg);
    int64_t *gid = malloc((size_t)n * sizeof *gid);
    uint64_t *first = malloc((size_t)n * sizeof *first);
    int64_t *rank = malloc((size_t)n * sizeof *rank);
    int64_t *pos = malloc((size_t)(n + 1) * sizeof *pos);
    int64_t rc = -2;
    if (!tk || !tg || !gid || !first || !rank || !pos)
        goto out;
    for (int64_t i = 0; i < size; i++)
        tg[i] = -1;
    int64_t ng = 0;
    const uint64_t mask = (uint64_t)size - 1;
    for (int64_t i = 0; i < n; i++) {
        const char *h = hops + i * isz;
        uint64_t key = ((uint64_t)RD(uint32_t, h, off[HO_NODE_ID]) << 16)
                       | RD(uint16_t, h, off[HO_EGRESS_PORT]);
        uint64_t p = (key * 0x9E3779B97F4A7C15ull >> 17) & mask;
        while (tg[p] >= 0 && tk[p] != key)
            p = (p + 1) & mask;
        if (tg[p] < 0) {
            tk[p] = key;
            tg[p] = ng;
            first[ng++] = key;
        }
        gid[i] = tg[p];
    }
    memcpy(uniq, first, (size_t)ng * sizeof *uniq);
    qsort(uniq, (size_t)ng, sizeof *uniq, cmp_u64);
    for (int64_t r = 0; r < ng; r++) {     /* group id -> rank of its key */
        uint64_t p = (uniq[r] * 0x9E3779B97F4A7C15ull >> 17) & mask;
        while (tk[p] != uniq[r])
            p = (p + 1) & mask;
        rank[tg[p]] = r;
    }
    for (int64_t r = 0; r <= ng; r++)
        pos[r] = 0;
    for (int64_t i = 0; i < n; i++)
        pos[rank[gid[i]] + 1]++;
    for (int64_t r = 0; r < ng; r++)
        pos[r + 1] += pos[r];
    for (int64_t r = 0; r < ng; r++)
        starts[r] = pos[r];
    for (int64_t i = 0; i < n; i++)
        order[pos[rank[gid[i]]]++] = i;
    rc = ng;
    for (int64_t r = 0; r < ng && rc >= 0; r++) {
        int64_t end = r + 1 < ng ? starts[r + 1] : n;
        for (int64_t j = starts[r] + 1; j < end; j++)
            if (RD(uint64_t, hops + order[j] * isz, off[HO_EGRESS_TS])
                < RD(uint64_t, hops + order[j - 1] * isz, off[HO_EGRESS_TS])) {
                rc = -1;
                break;
            }
    }
out:
    free(tk); free(tg); free(gid); free(first); free(rank); free(pos);
    return rc;
}
