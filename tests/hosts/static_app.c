/* A tiny static HTTP app for the distroless image test: no shell, no libc outside itself.
 * It says who it runs as (uid, gid, groups, HOME, USER, no_new_privs) on stdout, answers
 * GET /healthz with 200 on 127.0.0.1:8080, and on TERM drains: /healthz answers 503 for
 * DRAIN_MS (default 3000), then it exits 0. With --exit it only says who it runs as. Built with `gcc -static` by tests/hosts/docker.rs. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t term;

static void on_term(int sig) { (void)sig; term = 1; }

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv) {
    gid_t groups[64];
    int n = getgroups(64, groups);
    printf("app id uid=%u gid=%u groups=", getuid(), getgid());
    for (int i = 0; i < n; i++) printf("%s%u", i ? "," : "", groups[i]);
    printf(" HOME=%s USER=%s nnp=%d\n", getenv("HOME") ? getenv("HOME") : "-",
           getenv("USER") ? getenv("USER") : "-", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "--exit") == 0) return 0;

    struct sigaction sa = {0};
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);

    int s = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(8080)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&addr, sizeof addr) || listen(s, 16)) {
        perror("app: listen");
        return 1;
    }
    printf("app ready\n");
    fflush(stdout);

    long long drain_ms = getenv("DRAIN_MS") ? atoll(getenv("DRAIN_MS")) : 3000, until = 0;
    for (;;) {
        if (term && !until) {
            printf("app got TERM\n");
            fflush(stdout);
            until = now_ms() + drain_ms;
        }
        if (until && now_ms() >= until) {
            printf("app drained\n");
            fflush(stdout);
            return 0;
        }
        struct pollfd p = {.fd = s, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0) continue;
        int c = accept(s, NULL, NULL);
        if (c < 0) continue;
        char buf[1024];
        struct timeval tv = {.tv_sec = 1};
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ssize_t got = read(c, buf, sizeof buf - 1);
        buf[got > 0 ? got : 0] = 0;
        const char *answer = term ? "HTTP/1.1 503 Draining\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                         : strncmp(buf, "GET /healthz ", 13) == 0
                             ? "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"
                             : "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        if (write(c, answer, strlen(answer)) < 0) perror("app: write");
        close(c);
    }
}
