/* The floor client: the least a client can do to time a stream (bench/client_schedule.py
 * compiles it with cc). C keep-alive connections on one epoll loop; each read is recvmsg into
 * the stream's buffer, stamped with the kernel's receive time (SO_TIMESTAMPNS, put on
 * CLOCK_MONOTONIC with the tightest of a few back-to-back readings of both clocks), and nothing
 * else. Only when a response has ended are its chunks found ("@<server ns>" contents), each
 * stamped with the read that brought it, and written as specbench's records are (one JSON line
 * per request: {"chunks": [[t_ns since send, "@<sent>"], ...]}), so bench/client_overhead.py's
 * error definition applies unchanged. Knows only bench/floor/server.c's framing.
 *
 *     client HOST PORT C N TOKENS OUT_FILE
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_TIMESTAMPNS
#define SO_TIMESTAMPNS 35
#endif

typedef struct {
    int fd;
    int64_t t0;
    char *buf; size_t len, cap;
    int64_t *stamp; size_t *end; size_t nreads, rcap; /* per read: its stamp, the buffer's length after it */
} Stream;

static int64_t mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t real_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Wall clock minus monotonic, from the tightest of a few back-to-back readings. */
static int64_t clock_offset(void) {
    int64_t best_w = INT64_MAX, best = 0;
    for (int i = 0; i < 50; i++) {
        int64_t a = mono(), r = real_ns(), b = mono();
        if (b - a < best_w) { best_w = b - a; best = r - (a + b) / 2; }
    }
    return best;
}

static const char *request;
static size_t request_len;

static void start(Stream *s) {
    s->len = s->nreads = 0;
    s->t0 = mono();
    if (write(s->fd, request, request_len) != (ssize_t)request_len) { perror("write"); exit(1); }
}

static int done(const Stream *s) {
    static const char tail[] = "data: [DONE]\n\n\r\n0\r\n\r\n";
    size_t n = sizeof tail - 1;
    return s->len >= n && !memcmp(s->buf + s->len - n, tail, n);
}

static void record(FILE *out, const Stream *s) {
    fputs("{\"chunks\": [", out);
    size_t r = 0;
    int first = 1;
    for (char *p = s->buf, *stop = s->buf + s->len; (p = memmem(p, (size_t)(stop - p), "\"@", 2)); ) {
        p += 2;
        size_t digits = strspn(p, "0123456789");
        while (r + 1 < s->nreads && s->end[r] < (size_t)(p + digits - s->buf)) r++;
        fprintf(out, "%s[%lld, \"@%.*s\"]", first ? "" : ", ", (long long)(s->stamp[r] - s->t0), (int)digits, p);
        first = 0;
        p += digits;
    }
    fputs("]}\n", out);
}

int main(int argc, char **argv) {
    if (argc != 7) { fprintf(stderr, "usage: client HOST PORT C N TOKENS OUT_FILE\n"); return 2; }
    int c = atoi(argv[3]), n = atoi(argv[4]), tokens = atoi(argv[5]), one = 1;
    FILE *out = fopen(argv[6], "w");
    char body[256], *req = malloc(1024);
    int blen = snprintf(body, sizeof body,
                        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":%d,"
                        "\"stream\":true,\"ignore_eos\":true}", tokens);
    request_len = (size_t)snprintf(req, 1024,
                                   "POST /v1/chat/completions HTTP/1.1\r\nhost: %s:%s\r\n"
                                   "content-type: application/json\r\ncontent-length: %d\r\n\r\n%s",
                                   argv[1], argv[2], blen, body);
    request = req;
    if (c > n) c = n;
    int ep = epoll_create1(0);
    Stream *streams = calloc((size_t)c, sizeof *streams);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &addr.sin_addr);
    for (int i = 0; i < c; i++) {
        Stream *s = &streams[i];
        s->fd = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(s->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
        if (connect(s->fd, (struct sockaddr *)&addr, sizeof addr)) { perror("connect"); return 1; }
        s->cap = 1 << 20; s->buf = malloc(s->cap);
        s->rcap = 1 << 14; s->stamp = malloc(s->rcap * sizeof *s->stamp); s->end = malloc(s->rcap * sizeof *s->end);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
        epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev);
    }
    int64_t off = clock_offset();
    int started = 0, finished = 0;
    for (int i = 0; i < c; i++, started++) start(&streams[i]);
    struct epoll_event events[1024];
    char anc[CMSG_SPACE(sizeof(struct timespec))];
    while (finished < n) {
        int k = epoll_wait(ep, events, 1024, -1);
        for (int i = 0; i < k; i++) {
            Stream *s = events[i].data.ptr;
            if (s->cap - s->len < 65536) { s->cap *= 2; s->buf = realloc(s->buf, s->cap); }
            if (s->nreads == s->rcap) {
                s->rcap *= 2;
                s->stamp = realloc(s->stamp, s->rcap * sizeof *s->stamp);
                s->end = realloc(s->end, s->rcap * sizeof *s->end);
            }
            struct iovec iov = {s->buf + s->len, s->cap - s->len};
            struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = anc, .msg_controllen = sizeof anc};
            ssize_t r = recvmsg(s->fd, &msg, 0);
            if (r <= 0) { fprintf(stderr, "the server closed a connection\n"); return 1; }
            int64_t stamp = 0;
            for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_TIMESTAMPNS) {
                    struct timespec ts;
                    memcpy(&ts, CMSG_DATA(cm), sizeof ts);
                    stamp = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec - off;
                }
            s->len += (size_t)r;
            s->stamp[s->nreads] = stamp ? stamp : mono();
            s->end[s->nreads++] = s->len;
            if (!done(s)) continue;
            record(out, s);
            finished++;
            if (started < n) { started++; start(s); }
        }
    }
    fclose(out);
    return 0;
}
