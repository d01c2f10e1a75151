/* The benchmark's child programs, built static so they start as fast as a program can.
 *
 *   fixture true            exit 0 at once (the /static/true of the start-up figure)
 *   fixture record          on USR1 write CLOCK_MONOTONIC ns (8 bytes) to stdout; on TERM
 *                           write 0 and exit 0
 *   fixture sleep           wait forever
 *   fixture ignore-term     ignore TERM, write "r" to stdout, wait forever
 *   fixture orphans N [US]  leave N orphans for PID 1 (pausing US microseconds after each, so
 *                           that each SIGCHLD stands for one exit), sample the namespace's
 *                           zombies, wait until none is left; print "<ms> <most zombies at once>"
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static int count_zombies(void) {
    DIR *proc = opendir("/proc");
    struct dirent *e;
    int zombies = 0;
    char path[64], buf[512];
    if (!proc) return -1;
    while ((e = readdir(proc))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
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
    if (!strcmp(mode, "orphans")) {
        int n = argc > 2 ? atoi(argv[2]) : 2000, pace = argc > 3 ? atoi(argv[3]) : 0, most = 0;
        uint64_t start = now_ns();
        for (int i = 0; i < n; i++) {
            pid_t pid = fork();
            if (pid == 0) {
                if (fork() == 0) _exit(0); /* the orphan */
                _exit(0);
            }
            waitpid(pid, NULL, 0);
            if (pace > 0) usleep(pace);
            if (i % 100 == 99) {
                int z = count_zombies();
                if (z > most) most = z;
            }
        }
        for (;;) {
            int z = count_zombies();
            if (z > most) most = z;
            if (z == 0) break;
            usleep(1000);
        }
        printf("%.3f %d\n", (now_ns() - start) / 1e6, most);
        return 0;
    }
    fprintf(stderr, "fixture: unknown mode %s\n", mode);
    return 2;
}
