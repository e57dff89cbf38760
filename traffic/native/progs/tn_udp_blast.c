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
 *
 *   bin/tn_udp_blast --send ... --pps 10000
 *
 * paces instead: the pacing floor of this host, the best a user-space pacer can do on
 * it.  One datagram per departure time (size / rate apart), the thread spinning on the
 * clock through every gap at real-time priority (best effort), never sleeping, one
 * sendto each; a departure late by more than a gap starts the schedule afresh (no
 * burst).  Whatever still makes its gaps uneven in a capture (the host's timer tick,
 * interrupts, a hypervisor taking the CPU) would make any software pacer's uneven
 * too; bench/bench_engine.py's "floor" row.  The datagrams look like RDMA WRITE
 * MIDDLE packets (opcode, PSN) so the same capture reader counts them.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
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

/* --pps: one datagram every gap seconds, spinning on the clock between them (see the
 * top of the file); prints what the blast prints */
static int paced(int fd, char *buf, size_t size, long n, double gap)
{
    struct sched_param sp = {.sched_priority = 1};
    sched_setscheduler(0, SCHED_FIFO, &sp);  /* best effort: as the engine's thread */
    buf[0] = 0x07;                           /* RDMA WRITE MIDDLE */
    long sent = 0;
    double t0 = now(), due = t0 + 0.01;
    for (long i = 0; i < n; i++) {
        double t;
        while ((t = now()) < due)
            ;
        buf[9] = (char)(i >> 16);
        buf[10] = (char)(i >> 8);
        buf[11] = (char)i;
        if (send(fd, buf, size, 0) == (ssize_t)size)
            sent++;
        due = t - due > gap ? t + gap : due + gap;
    }
    double el = now() - t0;
    printf("%ld %ld %.6f %.0f\n", sent, sent * (long)size, el, (double)(sent * (long)size) * 8 / el);
    return 0;
}

int main(int argc, char **argv)
{
    int send = 0, port = 4791;
    const char *local = NULL, *peer = NULL;
    long size = 1056, n = 100000;
    double pps = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--send")) send = 1;
        else if (!strcmp(argv[i], "--recv")) send = 0;
        else if (i + 1 < argc && !strcmp(argv[i], "--local")) local = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--peer")) peer = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--port")) port = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "-s")) size = atol(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "-n")) n = atol(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--pps")) pps = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: %s --recv|--send --local IP [--peer IP] [--port P] "
                    "[-s bytes] [-n packets] [--pps rate]\n", argv[0]);
            return 2;
        }
    }
    struct sockaddr_in la = {.sin_family = AF_INET}, pa = {.sin_family = AF_INET};
    if (!local || !inet_aton(local, &la.sin_addr) || size < 12 || size > 9000 ||
        (send && (!peer || !inet_aton(peer, &pa.sin_addr))) || pps < 0 || pps > 1e7) {
        fprintf(stderr, "tn_udp_blast: need --local (and --peer to send), -s 12..9000, "
                "--pps 0..1e7\n");
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
        if (pps > 0) {
            if (connect(fd, (struct sockaddr *)&pa, sizeof pa)) {
                perror("connect");
                return 1;
            }
            return paced(fd, bufs[0], (size_t)size, n, 1.0 / pps);
        }
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
