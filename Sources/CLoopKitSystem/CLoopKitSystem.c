#if defined(__linux__)
#define _GNU_SOURCE
#endif

#include "CLoopKitSystem.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>
#include <dlfcn.h>
#if defined(__GLIBC__)
#include <malloc.h>
#elif defined(__APPLE__)
#include <malloc/malloc.h>
#endif

#if defined(__linux__)
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <sys/syscall.h>
#include <linux/futex.h>
#endif

#if defined(__linux__)
/// `ns` nanoseconds as a timespec, its seconds clamped to the largest `time_t`: a 32-bit `time_t` would otherwise
/// truncate a deadline some 68 years away into a wrong, or negative (EINVAL), one.
static struct timespec cloopkit_timespec_from_ns(uint64_t ns) {
    uint64_t seconds = ns / 1000000000ULL;
    const uint64_t max_seconds = sizeof(time_t) == 4 ? (uint64_t)INT32_MAX : (uint64_t)INT64_MAX;
    if (seconds > max_seconds) {
        return (struct timespec){.tv_sec = (time_t)max_seconds, .tv_nsec = 999999999L};
    }
    return (struct timespec){.tv_sec = (time_t)seconds, .tv_nsec = (long)(ns % 1000000000ULL)};
}
#endif

int cloopkit_poll_ns(struct pollfd *fds, unsigned long count, int64_t timeout_ns) {
#if defined(__linux__)
    if (timeout_ns < 0) {
        return ppoll(fds, (nfds_t)count, NULL, NULL);
    }
    struct timespec timeout = cloopkit_timespec_from_ns((uint64_t)timeout_ns);
    return ppoll(fds, (nfds_t)count, &timeout, NULL);
#else
    int timeout_ms;
    if (timeout_ns < 0) {
        timeout_ms = -1;
    } else {
        // Rounded up, without overflowing near INT64_MAX.
        int64_t ms = timeout_ns / 1000000LL + (timeout_ns % 1000000LL != 0);
        timeout_ms = ms > INT32_MAX ? INT32_MAX : (int)ms;
    }
    return poll(fds, (nfds_t)count, timeout_ms);
#endif
}

#if !defined(__linux__)
// Where pipe2, accept4 and SOCK_NONBLOCK do not exist: sets O_NONBLOCK and FD_CLOEXEC on a descriptor just made.
// On failure closes it, keeping the fcntl's errno, and returns -1. (A process spawned in between would inherit it.)
static int cloopkit_make_nonblocking_or_close(int fd) {
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}
#endif

int cloopkit_pipe_nonblocking(int fds[2]) {
#if defined(__linux__)
    return pipe2(fds, O_NONBLOCK | O_CLOEXEC);
#else
    if (pipe(fds) != 0) {
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        if (cloopkit_make_nonblocking_or_close(fds[i]) < 0) {
            int saved = errno;
            close(fds[1 - i]);  // the other end, still open either way
            errno = saved;
            return -1;
        }
    }
    return 0;
#endif
}

#if defined(__linux__)
_Static_assert(CLOOPKIT_EPOLL_IN == EPOLLIN && CLOOPKIT_EPOLL_OUT == EPOLLOUT, "epoll event bits");
_Static_assert(CLOOPKIT_EPOLL_ERR == EPOLLERR && CLOOPKIT_EPOLL_HUP == EPOLLHUP, "epoll event bits");
#endif

int cloopkit_accept_nonblocking(int listener) {
#if defined(__linux__)
    return accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
    int fd = accept(listener, NULL, NULL);
    return fd < 0 ? -1 : cloopkit_make_nonblocking_or_close(fd);
#endif
}

int cloopkit_stream_socket_nonblocking(int domain) {
#if defined(__linux__)
    return socket(domain, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
#else
    int fd = socket(domain, SOCK_STREAM, 0);
    return fd < 0 ? -1 : cloopkit_make_nonblocking_or_close(fd);
#endif
}

int cloopkit_epoll_create(void) {
#if defined(__linux__)
    return epoll_create1(EPOLL_CLOEXEC);
#else
    errno = ENOSYS;
    return -1;
#endif
}

int cloopkit_epoll_control(int epoll_fd, int operation, int fd, uint32_t events) {
#if defined(__linux__)
    static const int operations[] = {EPOLL_CTL_ADD, EPOLL_CTL_MOD, EPOLL_CTL_DEL};
    if (operation < 0 || operation > 2) {
        errno = EINVAL;
        return -1;
    }
    struct epoll_event event = {.events = events, .data = {.fd = fd}};
    return epoll_ctl(epoll_fd, operations[operation], fd, &event);
#else
    (void)epoll_fd; (void)operation; (void)fd; (void)events;
    errno = ENOSYS;
    return -1;
#endif
}

int cloopkit_epoll_wait(int epoll_fd, int *fds, uint32_t *events, int capacity, int timeout_ms) {
#if defined(__linux__)
    struct epoll_event ready[64];
    int limit = capacity < 64 ? capacity : 64;
    int count = epoll_wait(epoll_fd, ready, limit, timeout_ms);
    for (int i = 0; i < count; i++) {
        fds[i] = ready[i].data.fd;
        events[i] = ready[i].events;
    }
    return count;
#else
    (void)epoll_fd; (void)fds; (void)events; (void)capacity; (void)timeout_ms;
    errno = ENOSYS;
    return -1;
#endif
}

int cloopkit_timerfd_create(void) {
#if defined(__linux__)
    return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
#else
    errno = ENOSYS;
    return -1;
#endif
}

int cloopkit_timerfd_arm(int fd, uint64_t deadline_ns) {
#if defined(__linux__)
    struct itimerspec value = {
        .it_interval = {0, 0},
        .it_value = cloopkit_timespec_from_ns(deadline_ns),
    };
    return timerfd_settime(fd, TFD_TIMER_ABSTIME, &value, NULL);
#else
    (void)fd; (void)deadline_ns;
    errno = ENOSYS;
    return -1;
#endif
}

int cloopkit_timerfd_clear(int fd) {
    uint64_t expirations = 0;
    return read(fd, &expirations, sizeof expirations) < 0 ? -1 : 0;
}

uint32_t cloopkit_futex_load(const uint32_t *word) {
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

int cloopkit_futex_increment_and_wake(uint32_t *word) {
    __atomic_add_fetch(word, 1, __ATOMIC_RELEASE);
#if defined(__linux__)
    return syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0) < 0 ? -1 : 0;
#else
    errno = ENOSYS;
    return -1;
#endif
}

int cloopkit_futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline_ns) {
#if defined(__linux__)
    struct timespec deadline = cloopkit_timespec_from_ns(deadline_ns);
    // Without FUTEX_CLOCK_REALTIME, FUTEX_WAIT_BITSET's timeout is an absolute CLOCK_MONOTONIC instant.
    long result = syscall(SYS_futex, word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected,
                          deadline_ns == UINT64_MAX ? NULL : &deadline, NULL, FUTEX_BITSET_MATCH_ANY);
    if (result < 0) {
        return errno == ETIMEDOUT ? 1 : -1;
    }
    return 0;
#else
    (void)word; (void)expected; (void)deadline_ns;
    errno = ENOSYS;
    return -1;
#endif
}

void cloopkit_error_message(int code, char *buffer, unsigned long size) {
    if (size == 0) {
        return;
    }
#if (defined(__GLIBC__) || defined(__BIONIC__)) && defined(_GNU_SOURCE)
    // GNU's strerror_r returns the message, which may be a static string rather than `buffer`.
    const char *message = strerror_r(code, buffer, size);
    if (message != buffer) {
        snprintf(buffer, size, "%s", message);
    }
#else
    if (strerror_r(code, buffer, size) != 0) {
        snprintf(buffer, size, "unknown error %d", code);
    }
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

int cloopkit_main_queue_handle(void) {
#if defined(__linux__)
    int (*get_handle)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "_dispatch_get_main_queue_handle_4CF");
    if (get_handle == NULL || dlsym(RTLD_DEFAULT, "_dispatch_main_queue_callback_4CF") == NULL) {
        return -1;
    }
    return get_handle();
#else
    return -1;
#endif
}

void cloopkit_main_queue_drain(int handle) {
#if defined(__linux__)
    static void (*callback)(void *) = NULL;
    if (callback == NULL) {
        callback = (void (*)(void *))dlsym(RTLD_DEFAULT, "_dispatch_main_queue_callback_4CF");
    }
    // Reset the eventfd if it is readable (a poll first: the descriptor is libdispatch's, maybe blocking).
    struct pollfd readable = {.fd = handle, .events = POLLIN, .revents = 0};
    if (poll(&readable, 1, 0) == 1 && (readable.revents & POLLIN)) {
        uint64_t value;
        (void)read(handle, &value, sizeof value);
    }
    if (callback != NULL) {
        callback(NULL);
    }
#else
    (void)handle;
#endif
}

int cloopkit_thread_name(char *buffer, unsigned long size) {
#if defined(__linux__) || defined(__APPLE__)
    return pthread_getname_np(pthread_self(), buffer, size);
#else
    (void)buffer; (void)size;
    return ENOSYS;
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

#if defined(__linux__)
// struct sched_attr of sched_setattr(2), which glibc does not declare.
struct cloopkit_sched_attr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
};
#endif

int cloopkit_set_scheduler_slice(uint64_t nanoseconds) {
#if defined(__linux__) && defined(SYS_sched_setattr) && defined(SYS_sched_getattr)
    struct cloopkit_sched_attr attr = {0};
    if (syscall(SYS_sched_getattr, 0, &attr, (unsigned)sizeof attr, 0) != 0) {
        return -1;
    }
    if (attr.sched_policy != SCHED_OTHER && attr.sched_policy != SCHED_BATCH) {
        errno = EPERM;  // a real-time or deadline thread is scheduled otherwise: leave it alone
        return -1;
    }
    attr.size = sizeof attr;
    attr.sched_flags &= 0x01;  // SCHED_FLAG_RESET_ON_FORK, if the thread had it; nothing else applies to SCHED_OTHER
    attr.sched_runtime = nanoseconds;  // the custom slice of EEVDF (Linux 6.12 and later; ignored before)
    return (int)syscall(SYS_sched_setattr, 0, &attr, 0);
#else
    (void)nanoseconds;
    errno = ENOSYS;
    return -1;
#endif
}

long cloopkit_timer_slack(void) {
#if defined(__linux__)
    return (long)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
#else
    return -1;
#endif
}

int cloopkit_current_processor(void) {
#if defined(__linux__)
    return sched_getcpu();
#else
    return -1;
#endif
}

int64_t cloopkit_scheduler_slice(void) {
#if defined(__linux__) && defined(SYS_sched_getattr)
    struct cloopkit_sched_attr attr = {0};
    if (syscall(SYS_sched_getattr, 0, &attr, (unsigned)sizeof attr, 0) != 0) {
        return -1;
    }
    return (int64_t)attr.sched_runtime;
#else
    return -1;
#endif
}

#define CLOOPKIT_MAX_SIGNAL 65
#define CLOOPKIT_SIGNAL_SLOTS 16

// A slot's count word: the generation of the slot's listener in the high bits, the deliveries it has not taken in the
// low ones, so that a take checks whose count it is and empties it in one atomic step. A listener's ticket is its slot
// plus CLOOPKIT_SIGNAL_SLOTS times its generation; the generation moves on when the listener goes, so a late take
// with an old ticket finds nothing, even once a new listener has the slot.
#define CLOOPKIT_SIGNAL_COUNT_BITS 40
#define CLOOPKIT_SIGNAL_COUNT_MASK ((UINT64_C(1) << CLOOPKIT_SIGNAL_COUNT_BITS) - 1)
#define CLOOPKIT_SIGNAL_GENERATIONS (UINT64_C(1) << 20)  // so that a ticket fits an int

// Per signal, per slot (one per LoopSignalSource): the write end of the source's pipe plus one (0: a free slot), so
// that the zero-initialized table needs no setup; the count word. Per signal: the disposition replaced by the first
// source, given back when the last one goes, and how many slots are taken.
static _Atomic int cloopkit_signal_fds[CLOOPKIT_MAX_SIGNAL][CLOOPKIT_SIGNAL_SLOTS];
static _Atomic uint64_t cloopkit_signal_counts[CLOOPKIT_MAX_SIGNAL][CLOOPKIT_SIGNAL_SLOTS];
static struct sigaction cloopkit_signal_previous[CLOOPKIT_MAX_SIGNAL];
static int cloopkit_signal_users[CLOOPKIT_MAX_SIGNAL];
// Installs and uninstalls take this lock (never the handler), so that the first install and the last uninstall of a
// signal cannot race on its disposition.
static pthread_mutex_t cloopkit_signal_lock = PTHREAD_MUTEX_INITIALIZER;
// Per signal: how many handler calls are between reading a descriptor and finishing their write, so that
// uninstalling can wait for them before the caller closes the pipe (a late write must never reach a reused number).
static _Atomic int cloopkit_signal_writers[CLOOPKIT_MAX_SIGNAL];

/// Whether the default action of `signo` ends the process (with or without a core), rather than ignoring the signal
/// (SIGCHLD, SIGCONT, SIGURG, SIGWINCH) or stopping the process (SIGTSTP, SIGTTIN, SIGTTOU).
static int cloopkit_signal_default_ends_process(int signo) {
    switch (signo) {
    case SIGCHLD: case SIGCONT: case SIGURG: case SIGWINCH: case SIGTSTP: case SIGTTIN: case SIGTTOU:
        return 0;
    default:
        return 1;
    }
}

/// A delivery that no listener takes: LoopKit's handler was called after the last listener went, by a handler
/// installed since that chains to it (the last uninstall then leaves that one in place), or by code that saved it and
/// put it back. The signal does what it did before LoopKit took it: the replaced handler is called, or the default
/// action that ends the process is taken (once the handlers return: the signal is blocked while they run). Only a
/// signal whose default action ignores it or stops the process, or one that was ignored, is dropped. Async-signal-safe.
static void cloopkit_signal_forward(int signo, siginfo_t *info, void *context) {
    // A handler that calls LoopKit's and was saved as the one to pass on to (or LoopKit's own) would come back here:
    // a delivery that re-enters on this thread is dropped, not recursed on until the stack overflows.
    static _Thread_local int forwarding __attribute__((tls_model("initial-exec")));
    if (forwarding) {
        return;
    }
    forwarding = 1;
    struct sigaction previous = cloopkit_signal_previous[signo];
    // SIG_DFL and SIG_IGN first: a disposition may carry SA_SIGINFO beside them, and neither is a function.
    if (previous.sa_handler == SIG_DFL) {
        if (cloopkit_signal_default_ends_process(signo)) {
            struct sigaction fallback;
            memset(&fallback, 0, sizeof fallback);
            fallback.sa_handler = SIG_DFL;
            sigemptyset(&fallback.sa_mask);
            (void)sigaction(signo, &fallback, NULL);
            (void)raise(signo);
        }
    } else if (previous.sa_handler == SIG_IGN) {
        // ignored before LoopKit: ignored again
    } else if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(signo, info, context);
    } else {
        previous.sa_handler(signo);
    }
    forwarding = 0;
}

static void cloopkit_signal_handler(int signo, siginfo_t *info, void *context) {
    int saved = errno;  // the interrupted code may be about to read errno
    if (signo > 0 && signo < CLOOPKIT_MAX_SIGNAL) {
        int listeners = 0;
        atomic_fetch_add(&cloopkit_signal_writers[signo], 1);  // before the loads: see cloopkit_signal_uninstall
        for (int slot = 0; slot < CLOOPKIT_SIGNAL_SLOTS; slot++) {
            int fd = atomic_load(&cloopkit_signal_fds[signo][slot]) - 1;
            if (fd >= 0) {
                listeners += 1;
                atomic_fetch_add(&cloopkit_signal_counts[signo][slot], 1);
                char byte = 1;
                (void)write(fd, &byte, 1);  // non-blocking: a full pipe already wakes the loop
            }
        }
        atomic_fetch_sub(&cloopkit_signal_writers[signo], 1);
        if (listeners == 0) {
            cloopkit_signal_forward(signo, info, context);
        }
    }
    errno = saved;
}

/// Whether `signo` is raised by a fault of the instruction that runs (a bad address, an illegal instruction, a trap):
/// a handler that counts it and returns runs that instruction again, and faults again, for ever.
static int cloopkit_signal_is_fault(int signo) {
    return signo == SIGSEGV || signo == SIGBUS || signo == SIGFPE || signo == SIGILL || signo == SIGTRAP
        || signo == SIGSYS;
}

/// Waits out the handler calls of `signo` under way: a few instructions and non-blocking writes. After a few yields
/// it sleeps between looks: a handler preempted on this processor by a real-time caller (SCHED_FIFO) gets to run only
/// when the caller sleeps, since `sched_yield` gives way to real-time threads alone.
static void cloopkit_signal_wait_for_writers(int signo) {
    int yields = 0;
    while (atomic_load(&cloopkit_signal_writers[signo]) != 0) {
        if (yields < 64) {
            yields++;
            sched_yield();
        } else {
            struct timespec pause = {.tv_sec = 0, .tv_nsec = 50000};
            nanosleep(&pause, NULL);
        }
    }
}

int cloopkit_signal_install(int signo, int write_fd) {
    if (signo <= 0 || signo >= CLOOPKIT_MAX_SIGNAL || signo == SIGKILL || signo == SIGSTOP
        || cloopkit_signal_is_fault(signo) || write_fd < 0) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&cloopkit_signal_lock);
    int slot = 0;
    while (slot < CLOOPKIT_SIGNAL_SLOTS && atomic_load(&cloopkit_signal_fds[signo][slot]) != 0) {
        slot++;
    }
    if (slot == CLOOPKIT_SIGNAL_SLOTS) {
        pthread_mutex_unlock(&cloopkit_signal_lock);
        errno = EBUSY;  // every slot of this signal is taken
        return -1;
    }
    // A handler call that read the slot's previous descriptor may not have counted yet: its count would be taken as
    // this listener's.
    cloopkit_signal_wait_for_writers(signo);
    uint64_t generation = atomic_load(&cloopkit_signal_counts[signo][slot]) >> CLOOPKIT_SIGNAL_COUNT_BITS;
    atomic_store(&cloopkit_signal_counts[signo][slot], generation << CLOOPKIT_SIGNAL_COUNT_BITS);
    atomic_store(&cloopkit_signal_fds[signo][slot], write_fd + 1);
    if (cloopkit_signal_users[signo] == 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = cloopkit_signal_handler;
        sigemptyset(&action.sa_mask);
        action.sa_flags = SA_RESTART | SA_SIGINFO;  // SA_SIGINFO: a forwarded delivery passes its details on
        struct sigaction replaced;
        if (sigaction(signo, &action, &replaced) != 0) {
            int saved = errno;
            atomic_store(&cloopkit_signal_fds[signo][slot], 0);
            pthread_mutex_unlock(&cloopkit_signal_lock);
            errno = saved;
            return -1;
        }
        // LoopKit's own handler, left in place or put back since the last uninstall, is not what the signal did
        // before LoopKit: the disposition saved then stays the one to give back and to pass deliveries on to.
        if (!((replaced.sa_flags & SA_SIGINFO) && replaced.sa_sigaction == cloopkit_signal_handler)) {
            cloopkit_signal_previous[signo] = replaced;
        }
    }
    cloopkit_signal_users[signo] += 1;
    pthread_mutex_unlock(&cloopkit_signal_lock);
    int ticket = slot + CLOOPKIT_SIGNAL_SLOTS * (int)generation;
    // A blocked signal stays pending for ever when every thread blocks it, as in a child started from one of
    // Dispatch's threads (spawn keeps the parent thread's mask): let at least this thread take it.
    sigset_t unblocked;
    sigemptyset(&unblocked);
    sigaddset(&unblocked, signo);
    pthread_sigmask(SIG_UNBLOCK, &unblocked, NULL);
    return ticket;
}

uint64_t cloopkit_signal_uninstall(int signo, int ticket) {
    if (signo <= 0 || signo >= CLOOPKIT_MAX_SIGNAL || ticket < 0) {
        return 0;
    }
    int slot = ticket % CLOOPKIT_SIGNAL_SLOTS;
    uint64_t generation = (uint64_t)(ticket / CLOOPKIT_SIGNAL_SLOTS);
    pthread_mutex_lock(&cloopkit_signal_lock);
    uint64_t word = atomic_load(&cloopkit_signal_counts[signo][slot]);
    if (atomic_load(&cloopkit_signal_fds[signo][slot]) == 0 || word >> CLOOPKIT_SIGNAL_COUNT_BITS != generation) {
        pthread_mutex_unlock(&cloopkit_signal_lock);
        return 0;  // not this listener's slot any more
    }
    cloopkit_signal_users[signo] -= 1;
    if (cloopkit_signal_users[signo] == 0) {
        // What was there before (e.g. SIG_IGN), but only in place of LoopKit's own handler: one the program or a
        // library installed since stays, as it would have without LoopKit.
        struct sigaction current;
        if (sigaction(signo, NULL, &current) == 0 && (current.sa_flags & SA_SIGINFO)
            && current.sa_sigaction == cloopkit_signal_handler) {
            (void)sigaction(signo, &cloopkit_signal_previous[signo], NULL);
        }
    }
    atomic_store(&cloopkit_signal_fds[signo][slot], 0);
    // A handler that counted itself in before the store may still count and write to the old descriptor: wait it out,
    // so that its count is in the word taken below. One that counts itself in after the store reads 0 and does
    // neither. Sequentially consistent atomics order the two sides. (Under the lock: until the generation moves on,
    // an install must not take the slot.)
    cloopkit_signal_wait_for_writers(signo);
    // The next listener of the slot gets the next generation: this one's ticket takes nothing from it.
    uint64_t next = (generation + 1) % CLOOPKIT_SIGNAL_GENERATIONS;
    uint64_t left = atomic_exchange(&cloopkit_signal_counts[signo][slot], next << CLOOPKIT_SIGNAL_COUNT_BITS);
    pthread_mutex_unlock(&cloopkit_signal_lock);
    return left & CLOOPKIT_SIGNAL_COUNT_MASK;
}

uint64_t cloopkit_signal_take(int signo, int ticket) {
    if (signo <= 0 || signo >= CLOOPKIT_MAX_SIGNAL || ticket < 0) {
        return 0;
    }
    _Atomic uint64_t *counts = &cloopkit_signal_counts[signo][ticket % CLOOPKIT_SIGNAL_SLOTS];
    uint64_t generation = (uint64_t)(ticket / CLOOPKIT_SIGNAL_SLOTS);
    uint64_t word = atomic_load(counts);
    do {
        if (word >> CLOOPKIT_SIGNAL_COUNT_BITS != generation) {
            return 0;  // the slot has another listener now, or none
        }
    } while (!atomic_compare_exchange_weak(counts, &word, generation << CLOOPKIT_SIGNAL_COUNT_BITS));
    return word & CLOOPKIT_SIGNAL_COUNT_MASK;
}

int64_t cloopkit_heap_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    return (int64_t)mallinfo2().uordblks;
#else
    return -1;
#endif
}

int64_t cloopkit_allocation_size(const void *address) {
#if defined(__GLIBC__)
    return (int64_t)malloc_usable_size((void *)address);
#elif defined(__APPLE__)
    return (int64_t)malloc_size(address);
#else
    (void)address;
    return -1;
#endif
}

void cloopkit_reference_count_fence(void) {
    // Empty: what matters is that the caller cannot see that it is.
}
