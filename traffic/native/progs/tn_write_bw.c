/* tn_write_bw - RDMA WRITE bandwidth over the native engine, in the spirit of
 * perftest's ib_write_bw: start the server (responder side) first, then the client.
 *
 *   bin/tn_write_bw --server --local 127.0.0.2 --peer 127.0.0.1 -s 65536 -n 2000
 *   bin/tn_write_bw --local 127.0.0.1 --peer 127.0.0.2 -s 65536 -n 2000
 *
 * Both ends must agree on the QP count, mode, MTU and window (no handshake: QP i is
 * 0x10000 + i at both ends).  The client keeps --tx-depth messages in flight per QP
 * and prints bytes, iterations, average bandwidth and message rate; the server prints
 * what it received.  Options: -q QPs, -m gbn|sr|fec, -M MTU, -r rate bit/s (0:
 * unpaced, i.e. 400 Gbit/s), -w window packets, -t tx depth, -k/-f FEC k/m.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tn_verbs.h"

static void usage(const char *p)
{
    fprintf(stderr,
            "usage: %s [--server] --local IP --peer IP [-s size] [-n iters] [-q qps]\n"
            "          [-m gbn|sr|fec] [-M mtu] [-r rate_bps] [-w window] [-t tx_depth]\n"
            "          [-k fec_k] [-f fec_m] [--gso]\n"
            "  --gso: UDP segmentation offload (TN_ENGINE_GSO), on both ends for the most\n"
            "         effect; not through tc programs on the hosts' interfaces\n", p);
    exit(2);
}

/* 4096, 64K, 1M, 1G (binary multiples, as `python -m traffic -s`) */
static unsigned long long size_arg(const char *v, const char *prog)
{
    char *end;
    unsigned long long n = strtoull(v, &end, 0);
    if (*end == 'K' || *end == 'k') { n <<= 10; end++; }
    else if (*end == 'M' || *end == 'm') { n <<= 20; end++; }
    else if (*end == 'G' || *end == 'g') { n <<= 30; end++; }
    if (*end || end == v) {
        fprintf(stderr, "%s: size %s: expected e.g. 4096, 64K, 1M\n", prog, v);
        exit(2);
    }
    return n;
}

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int server = 0, qps = 1, depth = 16, gso = 0;
    const char *local = NULL, *peer = NULL;
    unsigned long long size = 65536, iters = 1000;
    unsigned mtu = 1024, window = 512, mode = TN_MODE_SR, k = 8, m = 1;
    double rate = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--server")) { server = 1; continue; }
        if (!strcmp(a, "--gso")) { gso = 1; continue; }
        if (!v)
            usage(argv[0]);
        i++;
        if (!strcmp(a, "--local")) local = v;
        else if (!strcmp(a, "--peer")) peer = v;
        else if (!strcmp(a, "-s")) size = size_arg(v, argv[0]);
        else if (!strcmp(a, "-n")) iters = strtoull(v, NULL, 0);
        else if (!strcmp(a, "-q")) qps = atoi(v);
        else if (!strcmp(a, "-M")) mtu = (unsigned)atoi(v);
        else if (!strcmp(a, "-r")) rate = atof(v);
        else if (!strcmp(a, "-w")) window = (unsigned)atoi(v);
        else if (!strcmp(a, "-t")) depth = atoi(v);
        else if (!strcmp(a, "-k")) k = (unsigned)atoi(v);
        else if (!strcmp(a, "-f")) m = (unsigned)atoi(v);
        else if (!strcmp(a, "-m")) {
            mode = !strcmp(v, "gbn") ? TN_MODE_GBN : !strcmp(v, "fec") ? TN_MODE_FEC
                 : !strcmp(v, "sr") ? TN_MODE_SR : 99;
            if (mode == 99)
                usage(argv[0]);
        } else
            usage(argv[0]);
    }
    struct in_addr la, pa;
    if (!local || !peer || !inet_aton(local, &la) || !inet_aton(peer, &pa) || qps < 1 ||
        depth < 1 || size < 1 || size > 0xFFFFFFFFull || iters < 1)
        usage(argv[0]);
    struct tn_engine_attr ea = {.ip = la.s_addr, .port = 4791, .flags = TN_ENGINE_THREAD |
                                                                   (gso ? TN_ENGINE_GSO : 0)};
    char err[256];
    struct tn_engine *e = tn_engine_create(&ea, err, sizeof err);
    if (!e) {
        fprintf(stderr, "tn_write_bw: %s\n", err);
        return 1;
    }
    for (int i = 0; i < qps; i++) {
        struct tn_qp_attr qa = {
            .qpn = 0x10000u + (unsigned)i, .peer_qpn = 0x10000u + (unsigned)i,
            .peer_ip = pa.s_addr, .role = server ? TN_RESPONDER : TN_REQUESTER, .mode = mode,
            .mtu = mtu, .rate_bps = rate > 0 ? rate : 400e9, .window_pkts = window,
            .fec_k = k, .fec_m = m, .rto_min_s = 0.004, .rto_max_s = 2.0,
            .rto_initial_s = 0.05, .max_msg_bytes = 1ull << 31, .burst_s = 50e-6,
            .min_burst_bytes = 2 * (mtu + 80)};
        if (tn_create_qp(e, &qa)) {
            fprintf(stderr, "tn_write_bw: %s\n", tn_last_error(e));
            return 1;
        }
    }
    if (tn_engine_start(e)) {
        fprintf(stderr, "tn_write_bw: %s\n", tn_last_error(e));
        return 1;
    }
    unsigned long long want = iters * (unsigned long long)qps, done = 0, bad = 0;
    struct tn_wc wc[256];
    double t0 = 0, t1 = 0;
    unsigned char *buf = malloc(size);
    for (unsigned long long i = 0; i < size; i++)
        buf[i] = (unsigned char)(i * 131 + 7);
    unsigned long long *posted = calloc((size_t)qps, sizeof *posted);
    unsigned long long *completed = calloc((size_t)qps, sizeof *completed);
    if (!server) {
        t0 = wall();
        for (int q = 0; q < qps; q++)
            for (; posted[q] < iters && posted[q] < (unsigned long long)depth; posted[q]++)
                tn_post_write(e, 0x10000u + (unsigned)q, buf, size, posted[q]);
    }
    uint32_t crc_ref = 0;
    double deadline = wall() + 600;
    while (done < want && wall() < deadline) {
        if (!tn_wait_cq(e, 1.0))
            continue;
        int n = tn_poll_cq(e, wc, 256);
        for (int i = 0; i < n; i++) {
            if (server) {
                if (done == 0) {
                    t0 = wc[i].posted_s;
                    crc_ref = wc[i].crc32;
                }
                if (wc[i].crc32 != crc_ref || wc[i].byte_len != size)
                    bad++;
                t1 = wc[i].done_s;
                done++;
                continue;
            }
            int q = (int)(wc[i].qpn - 0x10000u);
            completed[q]++;
            done++;
            if (posted[q] < iters) {
                tn_post_write(e, wc[i].qpn, buf, size, posted[q]);
                posted[q]++;
            }
        }
    }
    if (!server)
        t1 = wall();
    struct tn_engine_counters ec;
    tn_engine_counters(e, &ec);
    unsigned long long retx = 0;
    for (int q = 0; q < qps; q++) {
        struct tn_qp_counters c;
        tn_qp_counters(e, 0x10000u + (unsigned)q, &c);
        retx += c.retx_pkts;
    }
    double el = t1 - t0 > 0 ? t1 - t0 : 1e-9;
    printf("---------------------------------------------------------------------------\n");
    printf(" %s  mode %s  QPs %d  MTU %u  %s\n", server ? "server" : "client",
           mode == TN_MODE_GBN ? "gbn" : mode == TN_MODE_FEC ? "fec" : "sr", qps, mtu,
           rate > 0 ? "paced" : "unpaced");
    printf(" #bytes     #iterations    BW average[Gb/sec]   MsgRate[Mpps]   retx   bad\n");
    printf(" %-10llu %-14llu %-20.3f %-15.6f %-6llu %llu\n", size, done,
           (double)size * (double)done * 8 / el / 1e9, (double)done / el / 1e6, retx, bad);
    if (ec.gso_sends || ec.gro_reads)
        printf(" GSO: %llu sends of %llu frames; GRO: %llu reads of %llu frames\n",
               (unsigned long long)ec.gso_sends, (unsigned long long)ec.gso_pkts,
               (unsigned long long)ec.gro_reads, (unsigned long long)ec.gro_pkts);
    printf("---------------------------------------------------------------------------\n");
    fflush(stdout);
    int rc = done < want || bad ? 1 : 0;
    if (server) {  /* keep answering the client's last retransmissions for a moment */
        double until = wall() + 0.5;
        while (wall() < until)
            tn_wait_cq(e, 0.1);
    }
    tn_engine_destroy(e);
    free(buf); free(posted); free(completed);
    return rc;
}
