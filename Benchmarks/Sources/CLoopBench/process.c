#define _GNU_SOURCE
#include "CLoopBench.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// Child processes for the echo scenario: the servers it measures, started, read, stopped and reaped.

extern char **environ;

pid_t cbench_spawn(const char *path, char *const argv[], int *stdout_fd) {
    int ends[2];
    if (pipe2(ends, O_CLOEXEC) != 0) {
        return -1;
    }
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
    // dup2 clears close-on-exec on the copy: the child keeps its standard output, and neither original end.
    posix_spawn_file_actions_adddup2(&actions, ends[1], STDOUT_FILENO);
    // The spawning thread's mask and dispositions must not leak into the server.
    sigset_t none, terminate;
    sigemptyset(&none);
    sigemptyset(&terminate);
    sigaddset(&terminate, SIGTERM);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &terminate);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int failure = posix_spawn(&pid, path, &actions, &attributes, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    close(ends[1]);
    if (failure != 0) {
        close(ends[0]);
        errno = failure;
        return -1;
    }
    *stdout_fd = ends[0];
    return pid;
}

static uint64_t now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

long cbench_read_line(int fd, char *buffer, unsigned long size, int timeout_ms) {
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    unsigned long length = 0;
    while (length + 1 < size) {
        uint64_t now = now_ms();
        if (now >= deadline) {
            break;
        }
        struct pollfd watched = {.fd = fd, .events = POLLIN};
        int ready = poll(&watched, 1, (int)(deadline - now));
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready < 0) {
            return -1;
        }
        if (ready == 0) {
            break;
        }
        char byte;
        ssize_t count = read(fd, &byte, 1);
        if (count < 0 && errno == EINTR) {
            continue;
        }
        if (count <= 0) {
            return -1;
        }
        if (byte == '\n') {
            buffer[length] = 0;
            return (long)length;
        }
        buffer[length++] = byte;
    }
    buffer[length] = 0;
    return CBENCH_WOULD_BLOCK;
}

int cbench_terminate(pid_t pid) {
    return kill(pid, SIGTERM);
}

int cbench_kill(pid_t pid) {
    return kill(pid, SIGKILL);
}

int cbench_wait_exit(pid_t pid, int timeout_ms, int *code) {
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    while (1) {
        int status;
        pid_t result = waitpid(pid, &status, WNOHANG);
        if (result < 0 && errno == EINTR) {
            continue;
        }
        if (result < 0) {
            return -1;
        }
        if (result == pid && WIFEXITED(status)) {
            *code = WEXITSTATUS(status);
            return 1;
        }
        if (result == pid && WIFSIGNALED(status)) {
            *code = WTERMSIG(status);
            return 2;
        }
        if (now_ms() >= deadline) {
            return 0;
        }
        struct timespec pause = {.tv_sec = 0, .tv_nsec = 1000000};
        nanosleep(&pause, NULL);
    }
}

int64_t cbench_process_cpu_ns(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *file = fopen(path, "re");
    if (file == NULL) {
        return -1;
    }
    char line[1024];
    char *read = fgets(line, sizeof line, file);
    fclose(file);
    // The command name (field 2) is in parentheses and may hold spaces: count fields after its closing one.
    char *fields = read != NULL ? strrchr(line, ')') : NULL;
    unsigned long long user = 0, system = 0;
    // After ")": state (3), then ppid … cmajflt (4–13), then utime (14) and stime (15).
    if (fields == NULL || sscanf(fields + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &user,
                                 &system) != 2) {
        return -1;
    }
    long ticks = sysconf(_SC_CLK_TCK);
    return (int64_t)((user + system) * (1000000000ULL / (unsigned long long)(ticks > 0 ? ticks : 100)));
}

int cbench_block_sigterm(void) {
    sigset_t terminate;
    sigemptyset(&terminate);
    sigaddset(&terminate, SIGTERM);
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) {
        return -1;
    }
    return pthread_sigmask(SIG_BLOCK, &terminate, NULL) == 0 ? 0 : -1;
}

int cbench_wait_sigterm(void) {
    sigset_t terminate;
    sigemptyset(&terminate);
    sigaddset(&terminate, SIGTERM);
    int received;
    return sigwait(&terminate, &received) == 0 ? 0 : -1;
}
