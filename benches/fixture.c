/* The benchmark's child programs, built static so they start as fast as a program can.
 *
 *   fixture true            exit 0 at once (the /static/true of the start-up figure)
 *   fixture record          on USR1 write CLOCK_MONOTONIC ns (8 bytes) to stdout; on TERM
 *                           write 0 and exit 0
 *   fixture sleep           wait forever
 *   fixture ignore-term     ignore TERM, write "r" to stdout, wait forever
 *   fixture notify-flood    ignore TERM, write "r" to stdout, then send datagrams to
 *                           $NOTIFY_SOCKET as fast as it can, forever
 *   fixture orphans N [US]  leave N orphans for PID 1 (pausing US microseconds after each, so
 *                           that each SIGCHLD stands for one exit), sample the namespace's
 *                           zombies, wait until none is left (and no orphan is still running);
 *                           print "<ms> <most zombies at once> <PID 1's wake-ups>"
 *   fixture orphans N sync  as above, but each orphan is left only once PID 1 has reaped the one
 *                           before and is asleep again: one SIGCHLD, one wake-up, one reap per
 *                           orphan however slowly PID 1 runs (under valgrind, on a busy machine)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_usr1(int sig) {
    (void)sig;
    uint64_t t = now_ns();
    (void)!write(1, &t, sizeof t);
}

static void on_term(int sig) {
    (void)sig;
    uint64_t zero = 0;
    (void)!write(1, &zero, sizeof zero);
    _exit(0);
}

/* The zombies in the namespace; with `others`, also every other process but PID 1 and this one
 * (an orphan not yet run is not a zombie yet, and must not outlive the run). */
static int count_zombies(int others) {
    DIR *proc = opendir("/proc");
    struct dirent *e;
    int zombies = 0, self = getpid();
    char path[64], buf[512];
    if (!proc) return -1;
    while ((e = readdir(proc))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        int pid = atoi(e->d_name);
        if (others && pid != 1 && pid != self) {
            zombies++;
            continue;
        }
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *paren = strrchr(buf, ')');
        if (paren && paren[1] == ' ' && paren[2] == 'Z') zombies++;
    }
    closedir(proc);
    return zombies;
}

/* PID 1's state letter (S: asleep in its wait) and its context switches so far. */
static char pid1_state(long *switches) {
    char buf[4096];
    FILE *f = fopen("/proc/1/status", "r");
    char state = '?';
    *switches = 0;
    if (!f) return state;
    while (fgets(buf, sizeof buf, f)) {
        if (!strncmp(buf, "State:", 6)) sscanf(buf + 6, " %c", &state);
        long n;
        if (sscanf(buf, "voluntary_ctxt_switches: %ld", &n) == 1) *switches += n;
        if (sscanf(buf, "nonvoluntary_ctxt_switches: %ld", &n) == 1) *switches += n;
    }
    fclose(f);
    return state;
}

/* Until PID 1 has reaped `orphan` (its /proc entry is gone: a zombie keeps one) and sleeps in its
 * wait again, so that the next SIGCHLD finds it idle and nothing of this orphan's handling is
 * left to merge with the next one's. Polled: this process is not the one being measured. */
static void await_reaped(pid_t orphan) {
    char path[64];
    long switches;
    snprintf(path, sizeof path, "/proc/%d", (int)orphan);
    while (access(path, F_OK) == 0) usleep(50);
    while (pid1_state(&switches) != 'S') usleep(50);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "true";
    if (!strcmp(mode, "true")) return 0;
    if (!strcmp(mode, "record")) {
        struct sigaction sa = {0};
        sa.sa_handler = on_usr1;
        sigaction(SIGUSR1, &sa, NULL);
        sa.sa_handler = on_term;
        sigaction(SIGTERM, &sa, NULL);
        (void)!write(1, "r", 1);
        for (;;) pause();
    }
    if (!strcmp(mode, "sleep")) for (;;) pause();
    if (!strcmp(mode, "ignore-term")) {
        signal(SIGTERM, SIG_IGN);
        (void)!write(1, "r", 1);
        for (;;) pause();
    }
    if (!strcmp(mode, "notify-flood")) {
        signal(SIGTERM, SIG_IGN);
        const char *name = getenv("NOTIFY_SOCKET");
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        if (!name || strlen(name) >= sizeof addr.sun_path) return 2;
        strcpy(addr.sun_path, name);
        if (addr.sun_path[0] == '@') addr.sun_path[0] = 0;
        socklen_t len = offsetof(struct sockaddr_un, sun_path) + strlen(name);
        int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
        (void)!write(1, "r", 1);
        for (;;) (void)!sendto(fd, "STATUS=flood\n", 13, 0, (struct sockaddr *)&addr, len);
    }
    if (!strcmp(mode, "orphans")) {
        int n = argc > 2 ? atoi(argv[2]) : 2000, most = 0;
        int sync = argc > 3 && !strcmp(argv[3], "sync"), pace = argc > 3 && !sync ? atoi(argv[3]) : 0;
        long switches_before, switches_after;
        pid1_state(&switches_before);
        uint64_t start = now_ns();
        for (int i = 0; i < n; i++) {
            int p[2];
            if (sync && pipe(p) != 0) return 1;
            pid_t pid = fork();
            if (pid == 0) {
                pid_t orphan = fork();
                if (orphan == 0) _exit(0); /* the orphan */
                if (sync) (void)!write(p[1], &orphan, sizeof orphan);
                _exit(0);
            }
            if (sync) {
                pid_t orphan = 0;
                close(p[1]);
                (void)!read(p[0], &orphan, sizeof orphan);
                close(p[0]);
                waitpid(pid, NULL, 0);
                if (orphan > 0) await_reaped(orphan);
            } else {
                waitpid(pid, NULL, 0);
            }
            if (pace > 0) usleep(pace);
            if (i % 100 == 99) {
                int z = count_zombies(0);
                if (z > most) most = z;
            }
        }
        for (;;) {
            int z = count_zombies(0);
            if (z > most) most = z;
            if (z == 0 && count_zombies(1) == 0) break;
            usleep(1000);
        }
        pid1_state(&switches_after);
        printf("%.3f %d %ld\n", (now_ns() - start) / 1e6, most, switches_after - switches_before);
        return 0;
    }
    fprintf(stderr, "fixture: unknown mode %s\n", mode);
    return 2;
}
