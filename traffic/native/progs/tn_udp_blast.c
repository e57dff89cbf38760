/* tn_udp_blast - the path's limit for the engine benchmark: UDP datagrams of a given
 * size sent as fast as sendmmsg allows (batches of 64, one socket), counted at the
 * receiver with recvmmsg.  The same frames as a QP's (size = RoCEv2 UDP payload), on
 * the same path, without any transport: bench/bench_engine.py divides the engine's
 * goodput by this.
 *
 *   bin/tn_udp_blast --recv --local 127.0.0.2 [--port 4791]
 *   bin/tn_udp_blast --send --local 127.0.0.1 --peer 127.0.0.2 -s 1056 -n 200000
 *
 * Each end prints one line: packets, bytes, seconds and the payload rate in bit/s
 * (the sender: what sendmmsg took; the receiver: first to last packet received, ending
 * 0.5 s after the last).  A sender faster than its receiver loses the difference in
 * the receiver's socket buffer, so the received rate is the path's delivered limit.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int send = 0, port = 4791;
    const char *local = NULL, *peer = NULL;
    long size = 1056, n = 100000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--send")) send = 1;
        else if (!strcmp(argv[i], "--recv")) send = 0;
        else if (i + 1 < argc && !strcmp(argv[i], "--local")) local = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--peer")) peer = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--port")) port = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "-s")) size = atol(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "-n")) n = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: %s --recv|--send --local IP [--peer IP] [--port P] "
                    "[-s bytes] [-n packets]\n", argv[0]);
            return 2;
        }
    }
    struct sockaddr_in la = {.sin_family = AF_INET}, pa = {.sin_family = AF_INET};
    if (!local || !inet_aton(local, &la.sin_addr) || size < 1 || size > 9000 ||
        (send && (!peer || !inet_aton(peer, &pa.sin_addr)))) {
        fprintf(stderr, "tn_udp_blast: need --local (and --peer to send), -s 1..9000\n");
        return 2;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int big = 8 << 20, v = IP_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, sizeof v);
    enum { B = 64 };
    static char bufs[B][9216];
    struct mmsghdr mm[B];
    struct iovec iov[B];
    memset(mm, 0, sizeof mm);
    for (int i = 0; i < B; i++) {
        iov[i].iov_base = bufs[i];
        iov[i].iov_len = send ? (size_t)size : sizeof bufs[i];
        mm[i].msg_hdr.msg_iov = &iov[i];
        mm[i].msg_hdr.msg_iovlen = 1;
    }
    if (send) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
        la.sin_port = 0;
        pa.sin_port = htons((uint16_t)port);
        if (bind(fd, (struct sockaddr *)&la, sizeof la)) {
            perror("bind");
            return 1;
        }
        for (int i = 0; i < B; i++) {
            mm[i].msg_hdr.msg_name = &pa;
            mm[i].msg_hdr.msg_namelen = sizeof pa;
        }
        long sent = 0;
        double t0 = now();
        while (sent < n) {
            int k = n - sent < B ? (int)(n - sent) : B;
            int r = sendmmsg(fd, mm, (unsigned)k, 0);
            if (r > 0)
                sent += r;
        }
        double el = now() - t0;
        printf("%ld %ld %.6f %.0f\n", sent, sent * size, el, (double)(sent * size) * 8 / el);
        return 0;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big))
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    la.sin_port = htons((uint16_t)port);
    if (bind(fd, (struct sockaddr *)&la, sizeof la)) {
        perror("bind");
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    long pkts = 0, bytes = 0;
    double t0 = 0, t1 = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    for (;;) {
        if (poll(&p, 1, pkts ? 500 : 30000) <= 0)
            break;
        int r = recvmmsg(fd, mm, B, MSG_DONTWAIT, NULL);
        if (r <= 0)
            continue;
        double t = now();
        if (!pkts)
            t0 = t;
        t1 = t;
        for (int i = 0; i < r; i++)
            bytes += mm[i].msg_len;
        pkts += r;
    }
    double el = t1 - t0 > 0 ? t1 - t0 : 1e-9;
    printf("%ld %ld %.6f %.0f\n", pkts, bytes, el, (double)bytes * 8 / el);
    close(fd);
    return 0;
}
