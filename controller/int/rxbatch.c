/* Batched UDP receive for the telemetry collector (controller/int/rxbatch.py).
 *
 * One recvmmsg(2) call fills up to `max` fixed-size slots of one buffer with
 * datagrams (slot i at buf + i * stride), their lengths, IPv4 source addresses
 * and ports, and the socket's drop counter (SO_RXQ_OVFL) from the newest message
 * that carried it.  A datagram longer than its slot is marked with length
 * RX_TRUNCATED so the caller counts it instead of decoding a piece.
 *
 * With `spill` set, a slot is two pieces: its first `stride` bytes in the dense
 * buffer and the rest of a long datagram at spill + i * spill_stride.  Telemetry
 * Reports are a few hundred bytes but may be jumbo-sized: rows of 512 bytes put a
 * round's datagrams in 1 MiB instead of 18 MiB, and the kernel's copy into them
 * (and the decoder's reads) miss the caches and TLB much less (bench/README.md).
 * `src_ip` NULL: no source addresses asked for (the kernel then skips them).
 * Built by rxbatch.py with gcc at first use; no other dependency than libc.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#define RX_MAX 1024
#define RX_TRUNCATED 0xFFFFFFFFu

int rx_batch(int fd, unsigned char *buf, uint32_t stride, uint32_t max,
             uint32_t *lens, uint32_t *src_ip, uint16_t *src_port, uint32_t *ovfl,
             unsigned char *spill, uint32_t spill_stride)
{
    if (max > RX_MAX)
        max = RX_MAX;
    if (max == 0)
        return 0;
    /* on the caller's stack: several collectors may receive on several threads */
    struct mmsghdr msgs[max];
    struct iovec iov[max][2];
    struct sockaddr_in addr[max];
    char ctl[max][CMSG_SPACE(sizeof(uint32_t))];
    for (uint32_t i = 0; i < max; i++) {
        iov[i][0].iov_base = buf + (size_t)i * stride;
        iov[i][0].iov_len = stride;
        iov[i][1].iov_base = spill ? spill + (size_t)i * spill_stride : NULL;
        iov[i][1].iov_len = spill ? spill_stride : 0;
        memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
        msgs[i].msg_hdr.msg_iov = iov[i];
        msgs[i].msg_hdr.msg_iovlen = spill ? 2 : 1;
        if (src_ip) {
            msgs[i].msg_hdr.msg_name = &addr[i];
            msgs[i].msg_hdr.msg_namelen = sizeof(addr[i]);
        }
        msgs[i].msg_hdr.msg_control = ctl[i];
        msgs[i].msg_hdr.msg_controllen = sizeof(ctl[i]);
    }
    int n = recvmmsg(fd, msgs, max, MSG_DONTWAIT, NULL);
    if (n < 0)
        return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -errno;
    for (int i = 0; i < n; i++) {
        struct msghdr *h = &msgs[i].msg_hdr;
        lens[i] = (h->msg_flags & MSG_TRUNC) ? RX_TRUNCATED : msgs[i].msg_len;
        if (src_ip) {
            src_ip[i] = ntohl(addr[i].sin_addr.s_addr);
            src_port[i] = ntohs(addr[i].sin_port);
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL)
                memcpy(ovfl, CMSG_DATA(c), sizeof(uint32_t));
    }
    return n;
}
