/* Batched UDP receive for the telemetry collector (controller/int/rxbatch.py).
 *
 * One recvmmsg(2) call fills up to `max` fixed-size slots of one buffer with
 * datagrams (slot i at buf + i * stride), their lengths, IPv4 source addresses
 * and ports, and the socket's drop counter (SO_RXQ_OVFL) from the newest message
 * that carried it.  A datagram longer than its slot is marked with length
 * RX_TRUNCATED so the caller counts it instead of decoding a piece.
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
             uint32_t *lens, uint32_t *src_ip, uint16_t *src_port, uint32_t *ovfl)
{
    if (max > RX_MAX)
        max = RX_MAX;
    if (max == 0)
        return 0;
    /* on the caller's stack: several collectors may receive on several threads */
    struct mmsghdr msgs[max];
    struct iovec iov[max];
    struct sockaddr_in addr[max];
    char ctl[max][CMSG_SPACE(sizeof(uint32_t))];
    for (uint32_t i = 0; i < max; i++) {
        iov[i].iov_base = buf + (size_t)i * stride;
        iov[i].iov_len = stride;
        memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &addr[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(addr[i]);
        msgs[i].msg_hdr.msg_control = ctl[i];
        msgs[i].msg_hdr.msg_controllen = sizeof(ctl[i]);
    }
    int n = recvmmsg(fd, msgs, max, MSG_DONTWAIT, NULL);
    if (n < 0)
        return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -errno;
    for (int i = 0; i < n; i++) {
        struct msghdr *h = &msgs[i].msg_hdr;
        lens[i] = (h->msg_flags & MSG_TRUNC) ? RX_TRUNCATED : msgs[i].msg_len;
        src_ip[i] = ntohl(addr[i].sin_addr.s_addr);
        src_port[i] = ntohs(addr[i].sin_port);
        for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL)
                memcpy(ovfl, CMSG_DATA(c), sizeof(uint32_t));
    }
    return n;
}
