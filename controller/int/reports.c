/* Telemetry Report decoding of controller/int/decode.py, one native pass per round.
 * Built by controller/int/native_reports.py with gcc at first use.
 *
 * Python keeps the checks per shape (a shape is one combination of lengths and
 * bitmaps, validated once per round) and the counters; these functions do the work
 * per report: read the shape key of every datagram of a receive pool, read the
 * group headers for the sequence accounting, and copy the reports of one valid
 * shape into REPORT_DTYPE / HOP_DTYPE records, with exactly the arithmetic of the
 * numpy path (tests/controller_int/test_pool_paths.py compares the two).
 *
 * Datagrams are rows of a pool: row r at buf + r * stride, lens[r] bytes, words in
 * network order.  A word beyond a row's length reads as 0, as the numpy path's
 * gathers do.  Records are numpy structured arrays (packed), written at the byte
 * offsets Python passes in.
 */
#include <stdint.h>
#include <string.h>

static inline uint32_t word(const uint8_t *row, uint32_t words, int64_t c)
{
    if (c < 0 || c >= (int64_t)words)
        return 0;
    const uint8_t *p = row + 4 * c;
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void put(uint8_t *dst, int64_t size, uint64_t v)
{
    /* little-endian host (x86, arm64), numpy's native order; fixed-size copies
     * (a variable-size memcpy is a library call per field) */
    switch (size) {
    case 1: *dst = (uint8_t)v; break;
    case 2: { uint16_t x = (uint16_t)v; memcpy(dst, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(dst, &x, 4); break; }
    default: memcpy(dst, &v, 8); break;
    }
}

/* Group header words 0 and 1 of rows 0..n-1 with at least 8 bytes and version 2
 * (ok[r] = 1), for the report sequence accounting. */
void report_heads(const uint8_t *buf, int64_t stride, int64_t n, const uint32_t *lens,
                  uint32_t *out, uint8_t *ok)
{
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *row = buf + r * stride;
        ok[r] = lens[r] >= 8 && (row[0] >> 4) == 2;
        out[2 * r] = ok[r] ? word(row, 2, 0) : 0;
        out[2 * r + 1] = ok[r] ? word(row, 2, 1) : 0;
    }
}

#define KEY_N 17

/* The shape key of rows[0..n-1] (decode.py's _KEY order, then the row's words). */
void report_scan(const uint8_t *buf, int64_t stride, const int64_t *rows, int64_t n,
                 const uint32_t *lens, uint32_t *keys)
{
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *row = buf + rows[i] * stride;
        uint32_t w = lens[rows[i]] / 4;
        uint32_t *k = keys + i * KEY_N;
        uint32_t w2 = word(row, w, 2), w3 = word(row, w, 3), w4 = word(row, w, 4);
        uint32_t md_len = (w2 >> 8) & 0xFF;
        k[0] = w2 >> 28;
        k[1] = (w2 >> 24) & 0xF;
        k[2] = md_len;
        k[3] = w3 >> 16;
        k[4] = w3 & 0xFFFF;
        k[5] = w4 >> 16;
        int64_t ip0 = 5 + md_len;
        uint32_t ipw0 = word(row, w, ip0);
        uint32_t ihl = (ipw0 >> 24) & 0xF;
        k[6] = ipw0 >> 28;
        k[7] = ihl;
        k[8] = (word(row, w, ip0 + 2) >> 16) & 0xFF;
        int64_t shim_col = ip0 + ihl + 2;
        uint32_t shim = word(row, w, shim_col);
        k[9] = shim >> 28;
        k[10] = (shim >> 16) & 0xFF;
        uint32_t md0 = word(row, w, shim_col + 1), md1 = word(row, w, shim_col + 2);
        k[11] = md0 >> 28;
        k[12] = (md0 >> 8) & 0x1F;
        k[13] = md1 >> 16;
        k[14] = md1 & 0xFFFF;
        k[15] = word(row, w, shim_col + 3) >> 16;
        k[16] = w;
    }
}

/* One record position: parts as rows of 6 (word offset, words, shift, bits,
 * destination offset, destination size). */
static inline void fill(uint8_t *dst, const uint8_t *row, uint32_t w, int64_t base,
                        const int64_t *parts, int64_t np_, int64_t flags, int64_t fields_off)
{
    for (int64_t p = 0; p < np_; p++) {
        const int64_t *q = parts + 6 * p;
        uint64_t col = word(row, w, base + q[0]);
        if (q[1] == 2)
            col = (col << 32) | word(row, w, base + q[0] + 1);
        uint64_t v = col >> q[2];
        if (q[3] < 64)
            v &= ((uint64_t)1 << q[3]) - 1;
        put(dst + q[4], q[5], v);
    }
    uint16_t f = (uint16_t)flags;
    memcpy(dst + fields_off, &f, 2);
}

/* Sample field offsets (REPORT_DTYPE), in this order. */
enum { S_ARRIVAL, S_SOURCE, S_REPORTER, S_SEQ, S_SRC, S_DST, S_SPORT, S_DPORT, S_QP, S_PSN,
       S_OPCODE, S_HAS_BTH, S_HOP_COUNT, S_E_BIT, S_INS, S_DS, S_N };
/* Hop field offsets (HOP_DTYPE): sample, hop_index, fields, node_id. */
enum { H_SAMPLE, H_INDEX, H_FIELDS, H_NODE, H_N };
/* Shape geometry, from Python's checks. */
enum { G_IP0, G_IHL, G_SHIM, G_STACK, G_HOP_ML, G_N_STACK, G_HAS_SINK, G_BTH_OK, G_BTH,
       G_N_HOPS, G_INS, G_DS_INS, G_SOURCE, G_RORCE_PORT, G_NODE_FLAG, G_N };

/* Reports rows[0..n-1] of one valid shape into samples[0..n-1] and
 * hops[0..n*n_hops-1] (both zeroed by the caller). */
void report_fill(const uint8_t *buf, int64_t stride, const int64_t *rows, int64_t n,
                 const uint32_t *lens, int64_t arrival_ns, const int64_t *g,
                 uint8_t *samples, int64_t s_isz, const int64_t *so,
                 uint8_t *hops, int64_t h_isz, const int64_t *ho,
                 const int64_t *hop_parts, int64_t n_hop_parts, int64_t hop_flags,
                 const int64_t *sink_parts, int64_t n_sink_parts, int64_t sink_flags)
{
    const int64_t ip0 = g[G_IP0], ihl = g[G_IHL], shim = g[G_SHIM], stack = g[G_STACK];
    const int64_t hop_ml = g[G_HOP_ML], n_stack = g[G_N_STACK], n_hops = g[G_N_HOPS];
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *row = buf + rows[i] * stride;
        uint32_t w = lens[rows[i]] / 4;
        uint8_t *s = samples + i * s_isz;
        put(s + so[S_ARRIVAL], 8, (uint64_t)arrival_ns);
        put(s + so[S_SOURCE], 1, (uint64_t)g[G_SOURCE]);
        put(s + so[S_REPORTER], 4, word(row, w, 1));
        put(s + so[S_SEQ], 4, word(row, w, 0) & 0x3FFFFF);
        put(s + so[S_SRC], 4, word(row, w, ip0 + 3));
        put(s + so[S_DST], 4, word(row, w, ip0 + 4));
        put(s + so[S_SPORT], 2, word(row, w, ip0 + ihl) >> 16);
        uint32_t dport = word(row, w, shim) & 0xFFFF;
        put(s + so[S_DPORT], 2, dport);
        put(s + so[S_HOP_COUNT], 1, (uint64_t)n_hops);
        put(s + so[S_E_BIT], 1, (word(row, w, shim + 1) >> 26) & 1);
        put(s + so[S_INS], 2, (uint64_t)g[G_INS]);
        put(s + so[S_DS], 2, (uint64_t)g[G_DS_INS]);
        if (g[G_BTH_OK]) {
            int roce = dport == (uint32_t)g[G_RORCE_PORT];
            int64_t bth = g[G_BTH];
            put(s + so[S_HAS_BTH], 1, (uint64_t)roce);
            put(s + so[S_OPCODE], 1, roce ? word(row, w, bth) >> 24 : 0);
            put(s + so[S_QP], 4, roce ? word(row, w, bth + 1) & 0xFFFFFF : 0);
            put(s + so[S_PSN], 4, roce ? word(row, w, bth + 2) & 0xFFFFFF : 0);
        }
        for (int64_t h = 0; h < n_hops; h++) {
            uint8_t *d = hops + (i * n_hops + h) * h_isz;
            put(d + ho[H_SAMPLE], 4, (uint64_t)i);
            put(d + ho[H_INDEX], 1, (uint64_t)h);
        }
        /* the stack holds the newest hop first: position n_stack-1-k from word k */
        for (int64_t k = 0; k < n_stack; k++)
            fill(hops + (i * n_hops + n_stack - 1 - k) * h_isz, row, w, stack + k * hop_ml,
                 hop_parts, n_hop_parts, hop_flags, ho[H_FIELDS]);
        if (g[G_HAS_SINK]) {
            uint8_t *d = hops + (i * n_hops + n_hops - 1) * h_isz;
            fill(d, row, w, 5, sink_parts, n_sink_parts, sink_flags | g[G_NODE_FLAG],
                 ho[H_FIELDS]);
            put(d + ho[H_NODE], 4, word(row, w, 1));
        }
    }
}

/* One switch's report sequence numbers of a round (controller/int/seq.py), in
 * arrival order: unwrapped against the previous arrival, counting the late and
 * the duplicate ones.  state: last, highest, late, duplicates (updated). */
void seq_run(const int64_t *seq, int64_t n, int64_t mod, int64_t *state)
{
    const int64_t half = mod / 2;
    int64_t ext = state[0], running = state[1], late = 0, dups = 0;
    int64_t prev = ((ext % mod) + mod) % mod;
    for (int64_t i = 0; i < n; i++) {
        int64_t d = ((seq[i] - prev) % mod + mod) % mod;
        if (d >= half)
            d -= mod;
        ext += d;
        if (ext < running)
            late++;
        else if (ext == running)
            dups++;
        else
            running = ext;
        prev = seq[i];
    }
    state[0] = ext;
    state[1] = running;
    state[2] += late;
    state[3] += dups;
}

/* What decode_pool does with each row of a pool: 0 no datagram, 1 short, 2 unaligned,
 * 3 bad version, 4 report length beyond the datagram, 5 one report, 6 several. */
void report_classify(const uint8_t *buf, int64_t stride, int64_t n, const uint32_t *lens,
                     uint8_t *cls)
{
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *row = buf + r * stride;
        int64_t len = lens[r];
        if (len == 0)
            cls[r] = 0;
        else if (len < 20)
            cls[r] = 1;
        else if (len & 3)
            cls[r] = 2;
        else if ((row[0] >> 4) != 2)
            cls[r] = 3;
        else {
            int64_t end = 12 + 4 * (int64_t)row[9];
            cls[r] = end > len ? 4 : end == len ? 5 : 6;
        }
    }
}
