#if defined(__linux__)
#define _GNU_SOURCE
#endif

#include "CLoopKitSystem.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif

int cloopkit_poll_ns(struct pollfd *fds, unsigned long count, int64_t timeout_ns) {
#if defined(__linux__)
    if (timeout_ns < 0) {
        return ppoll(fds, (nfds_t)count, NULL, NULL);
    }
    struct timespec timeout = {
        .tv_sec = (time_t)(timeout_ns / 1000000000LL),
        .tv_nsec = (long)(timeout_ns % 1000000000LL),
    };
    return ppoll(fds, (nfds_t)count, &timeout, NULL);
#else
    int timeout_ms;
    if (timeout_ns < 0) {
        timeout_ms = -1;
    } else {
        int64_t ms = (timeout_ns + 999999LL) / 1000000LL;
        timeout_ms = ms > INT32_MAX ? INT32_MAX : (int)ms;
    }
    return poll(fds, (nfds_t)count, timeout_ms);
#endif
}

int cloopkit_pipe_nonblocking(int fds[2]) {
#if defined(__linux__)
    return pipe2(fds, O_NONBLOCK | O_CLOEXEC);
#else
    if (pipe(fds) != 0) {
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        if (fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK) != 0 ||
            fcntl(fds[i], F_SETFD, FD_CLOEXEC) != 0) {
            int saved = errno;
            close(fds[0]);
            close(fds[1]);
            errno = saved;
            return -1;
        }
    }
    return 0;
#endif
}

bool cloopkit_is_main_thread(void) {
#if defined(__linux__)
    return (pid_t)syscall(SYS_gettid) == getpid();
#elif defined(__APPLE__)
    return pthread_main_np() != 0;
#else
    return false;
#endif
}

void cloopkit_set_thread_name(const char *name) {
    char truncated[16];
    size_t i = 0;
    for (; name[i] != 0 && i < sizeof(truncated) - 1; i++) {
        truncated[i] = name[i];
    }
    truncated[i] = 0;
#if defined(__linux__)
    (void)pthread_setname_np(pthread_self(), truncated);
#elif defined(__APPLE__)
    (void)pthread_setname_np(truncated);
#endif
}

int cloopkit_set_timer_slack(unsigned long nanoseconds) {
#if defined(__linux__)
    return prctl(PR_SET_TIMERSLACK, nanoseconds, 0, 0, 0);
#else
    (void)nanoseconds;
    return 0;
#endif
}
