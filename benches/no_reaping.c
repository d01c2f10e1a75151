/* The reaping section's baseline: an init that does no reaping work at all, so that the benchmark
 * can tell the init's part of a reaping run from the kernel's and the machine's.
 *
 * It sets SIGCHLD to SIG_IGN, so the kernel reaps every child of its own the moment it exits,
 * orphans re-parented to it included, in the exiting process's context: no signal, no wake-up,
 * no wait call in the init per orphan. It then sleeps in poll on a pidfd of its command, which
 * only that one exit makes readable (a blocking wait would be woken by every orphan's exit, with
 * SIGCHLD ignored, and be put back to sleep: work per orphan). The status is lost to the
 * automatic reaping, so it exits 0 once the command is gone: a baseline, not an init. It
 * forwards no signal.
 *
 *   no_reaping [--] COMMAND [ARG...]
 */
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

int main(int argc, char **argv) {
    int first = (argc > 1 && argv[1][0] == '-' && argv[1][1] == '-' && !argv[1][2]) ? 2 : 1;
    if (first >= argc) return 2;
    signal(SIGCHLD, SIG_IGN);
    pid_t child = vfork();
    if (child < 0) return 125;
    if (child == 0) {
        signal(SIGCHLD, SIG_DFL); /* the command starts as it would under any init */
        execvp(argv[first], argv + first);
        _exit(127);
    }
    /* The command may already be gone (and reaped): then pidfd_open fails, and so does waitpid. */
    int fd = (int)syscall(SYS_pidfd_open, child, 0);
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (poll(&p, 1, -1) < 0) {
    }
    return 0;
}
