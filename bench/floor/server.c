/* A precise streaming server for measuring clients (bench/client_schedule.py compiles it with cc).
 *
 * The C twin of bench/stream_server.py, with the same framing and endpoints: every interval a
 * timer (timerfd, absolute, so the schedule never drifts) writes the next SSE chunk to every
 * open stream; each chunk's content is "@<CLOCK_MONOTONIC ns>" taken just before that stream's
 * write (Python's perf_counter_ns reads the same clock), so a client's gaps can be compared with
 * the true write gaps chunk by chunk. HTTP/1.1 keep-alive, chunked transfer, one thread, epoll.
 * GET /reset starts a load window; GET /stats reports it (first_ns, last_ns, tokens, tick_p99_ms).
 *
 *     server PORT INTERVAL_US
 * prints "ready" once listening.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONN 4096
#define MAX_TICKS (1 << 22)

typedef struct {
    int fd, open, streaming, left, total, sent;
    char *in; size_t in_len, in_cap;
    char *out; size_t out_len, out_cap; /* bytes the socket did not take yet */
} Conn;

static Conn conns[MAX_CONN];
static int ep, nstreams;
static int64_t first_ns, last_ns, tokens;
static int64_t *ticks; static size_t nticks;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return;
    while (*cap < need) *cap = *cap ? *cap * 2 : 65536;
    *buf = realloc(*buf, *cap);
    if (!*buf) { perror("realloc"); exit(1); }
}

static void drop(Conn *c) {
    if (!c->open) return;
    if (c->streaming) nstreams--;
    close(c->fd);
    c->open = c->streaming = 0;
    c->in_len = c->out_len = 0;
}

/* Write, keeping what the socket does not take (rare on loopback) for EPOLLOUT. */
static void send_all(Conn *c, const char *data, size_t n) {
    if (c->out_len == 0) {
        ssize_t w = write(c->fd, data, n);
        if (w < 0 && errno != EAGAIN) { drop(c); return; }
        if (w < 0) w = 0;
        data += w; n -= (size_t)w;
        if (n == 0) return;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.fd = c->fd};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    }
    grow(&c->out, &c->out_cap, c->out_len + n);
    memcpy(c->out + c->out_len, data, n);
    c->out_len += n;
}

static void flush_out(Conn *c) {
    ssize_t w = write(c->fd, c->out, c->out_len);
    if (w < 0) { if (errno != EAGAIN) drop(c); return; }
    memmove(c->out, c->out + w, c->out_len - (size_t)w);
    c->out_len -= (size_t)w;
    if (c->out_len == 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = c->fd};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    }
}

/* One SSE event as one HTTP chunk: "<hex>\r\ndata: <json>\n\n\r\n". */
static size_t sse(char *dst, const char *json) {
    size_t n = strlen(json) + 8; /* "data: " + "\n\n" */
    return (size_t)sprintf(dst, "%zx\r\ndata: %s\n\n\r\n", n, json);
}

static void write_token(Conn *c) {
    char json[512], out[2048];
    int64_t t = now_ns(); /* just before this stream's write */
    c->left--; c->sent++; tokens++; last_ns = t;
    snprintf(json, sizeof json,
             "{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"model\":\"bench\",\"choices\":"
             "[{\"index\":0,\"delta\":{\"content\":\"@%lld\"},\"finish_reason\":%s}]}",
             (long long)t, c->left == 0 ? "\"length\"" : "null");
    size_t n = sse(out, json);
    if (c->left == 0) {
        snprintf(json, sizeof json,
                 "{\"id\":\"x\",\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":%d,"
                 "\"total_tokens\":%d}}", c->total, c->total + 8);
        n += sse(out + n, json);
        n += sse(out + n, "[DONE]");
        n += (size_t)sprintf(out + n, "0\r\n\r\n");
        c->streaming = 0;
        nstreams--;
    }
    send_all(c, out, n);
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void reply_json(Conn *c, const char *status, const char *body) {
    char out[1024];
    int n = snprintf(out, sizeof out,
                     "HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %zu\r\n\r\n%s",
                     status, strlen(body), body);
    send_all(c, out, (size_t)n);
}

static void stats(Conn *c) {
    char body[256], p99[32] = "null";
    if (nticks > 1) {
        size_t n = nticks - 1;
        int64_t *gaps = malloc(n * sizeof *gaps);
        for (size_t i = 0; i < n; i++) gaps[i] = ticks[i + 1] - ticks[i];
        qsort(gaps, n, sizeof *gaps, cmp64);
        snprintf(p99, sizeof p99, "%.6f", gaps[(size_t)(0.99 * (double)(n - 1))] / 1e6);
        free(gaps);
    }
    snprintf(body, sizeof body, "{\"first_ns\":%lld,\"last_ns\":%lld,\"tokens\":%lld,\"tick_p99_ms\":%s}",
             (long long)first_ns, (long long)last_ns, (long long)tokens, p99);
    reply_json(c, "200 OK", body);
}

static void start_stream(Conn *c, const char *body) {
    const char *m = strstr(body, "\"max_tokens\"");
    int max_tokens = 16;
    if (m && (m = strchr(m, ':'))) max_tokens = atoi(m + 1);
    if (max_tokens < 1) max_tokens = 1;
    c->left = c->total = max_tokens;
    c->sent = 0;
    if (!first_ns) first_ns = now_ns();
    static const char head[] =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        "transfer-encoding: chunked\r\n\r\n";
    char out[512];
    size_t n = strlen(head);
    memcpy(out, head, n);
    n += sse(out + n, "{\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}");
    send_all(c, out, n);
    if (c->open) { c->streaming = 1; nstreams++; }
}

static void handle(Conn *c, const char *path, const char *body) {
    size_t plen = strcspn(path, " ");
    char p[256];
    snprintf(p, sizeof p, "%.*s", (int)(plen < 255 ? plen : 255), path);
    size_t l = strlen(p);
    if ((l >= 17 && !strcmp(p + l - 17, "/chat/completions")) || (l >= 12 && !strcmp(p + l - 12, "/completions"))) {
        start_stream(c, body);
        return;
    }
    if (!strcmp(p, "/reset")) { first_ns = last_ns = tokens = 0; nticks = 0; }
    if (!strcmp(p, "/stats")) { stats(c); return; }
    int found = !strncmp(p, "/v1/models", 10) || !strcmp(p, "/health") || !strcmp(p, "/reset");
    reply_json(c, found ? "200 OK" : "404 Not Found", "{\"object\":\"list\",\"data\":[{\"id\":\"bench\"}]}");
}

/* Every whole request in the connection's buffer (keep-alive: one after another). */
static void parse_requests(Conn *c) {
    for (;;) {
        char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
        if (!end) return;
        size_t head = (size_t)(end - c->in) + 4, size = 0;
        for (char *h = c->in; h && h < end; h = memmem(h, (size_t)(end - h), "\r\n", 2)) {
            if (h[0] == '\r') h += 2;
            if (!strncasecmp(h, "content-length:", 15)) size = (size_t)atol(h + 15);
            if (h >= end) break;
        }
        if (c->in_len < head + size) return;
        grow(&c->in, &c->in_cap, head + size + 1);
        char save = c->in[head + size];
        c->in[head + size] = 0; /* the body as a string (the buffer always has room for it) */
        char *sp = memchr(c->in, ' ', head);
        if (sp) handle(c, sp + 1, c->in + head);
        c->in[head + size] = save;
        if (!c->open) return;
        memmove(c->in, c->in + head + size, c->in_len - head - size);
        c->in_len -= head + size;
    }
}

static void on_read(Conn *c) {
    for (;;) {
        grow(&c->in, &c->in_cap, c->in_len + 65536 + 1);
        ssize_t r = read(c->fd, c->in + c->in_len, 65536);
        if (r == 0) { drop(c); return; }
        if (r < 0) { if (errno != EAGAIN) drop(c); break; }
        c->in_len += (size_t)r;
    }
    parse_requests(c);
}

static void tick(void) {
    if (nticks < MAX_TICKS) ticks[nticks++] = now_ns();
    for (int i = 0; i < MAX_CONN; i++)
        if (conns[i].open && conns[i].streaming) write_token(&conns[i]);
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: server PORT INTERVAL_US\n"); return 2; }
    int port = atoi(argv[1]);
    long interval_ns = atol(argv[2]) * 1000L;
    ticks = malloc(MAX_TICKS * sizeof *ticks);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) || listen(lfd, 1024)) { perror("listen"); return 1; }
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    ev.data.fd = tfd;
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
    int armed = 0;
    int64_t next = 0;
    printf("ready\n");
    fflush(stdout);
    struct epoll_event events[256];
    for (;;) {
        if (nstreams > 0 && !armed) { /* the schedule starts with the first stream after an idle spell */
            next = now_ns() + interval_ns;
            struct itimerspec its = {.it_value = {next / 1000000000LL, next % 1000000000LL},
                                     .it_interval = {interval_ns / 1000000000L, interval_ns % 1000000000L}};
            timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
            armed = 1;
        }
        int n = epoll_wait(ep, events, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == lfd) {
                int cfd;
                while ((cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (cfd >= MAX_CONN) { close(cfd); continue; }
                    setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    Conn *c = &conns[cfd];
                    c->fd = cfd; c->open = 1; c->streaming = 0; c->in_len = c->out_len = 0;
                    struct epoll_event cev = {.events = EPOLLIN, .data.fd = cfd};
                    epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &cev);
                }
            } else if (fd == tfd) {
                uint64_t expirations;
                /* Late (the server was held): catch up tick by tick, as the Python one does, so the
                 * schedule's token count holds; the chunks' own stamps show the burst. */
                if (read(tfd, &expirations, sizeof expirations) > 0)
                    for (uint64_t k = 0; k < expirations && nstreams > 0; k++) tick();
                if (nstreams == 0) {
                    struct itimerspec off = {0};
                    timerfd_settime(tfd, 0, &off, NULL);
                    armed = 0;
                }
            } else {
                Conn *c = &conns[fd];
                if (events[i].events & EPOLLOUT) flush_out(c);
                if (c->open && (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) on_read(c);
            }
        }
    }
}
