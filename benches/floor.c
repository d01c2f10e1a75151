/* The physical floor for the benchmark: the least an init can do and still be one. It blocks
 * every signal, starts the command with vfork+exec, forwards each signal with sigwaitinfo+kill,
 * reaps every child, and exits with the command's status. No options, no logging, no checks
 * beyond what keeps it correct, no shutdown order: what any init must pay, so that the
 * benchmark shows lastcall's distance to it, not only to the peers.
 *
 *   floor [--] COMMAND [ARG...]
 */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    sigprocmask(SIG_BLOCK, &all, NULL);

    int first = (argc > 1 && argv[1][0] == '-' && argv[1][1] == '-' && !argv[1][2]) ? 2 : 1;
    if (first >= argc) return 2;
    pid_t child = vfork();
    if (child < 0) return 125;
    if (child == 0) {
        sigprocmask(SIG_SETMASK, &none, NULL);
        execvp(argv[first], argv + first);
        _exit(127);
    }

    for (;;) {
        siginfo_t info;
        int sig = sigwaitinfo(&all, &info);
        if (sig < 0) continue;
        if (sig != SIGCHLD) {
            kill(child, sig);
            continue;
        }
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            if (pid == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
    }
}
