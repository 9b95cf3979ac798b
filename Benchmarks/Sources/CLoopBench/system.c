#define _GNU_SOURCE
#include "CLoopBench.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

uint64_t cbench_now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

void cbench_sleep_until_ns(uint64_t deadline_ns) {
    struct timespec deadline = {
        .tv_sec = (time_t)(deadline_ns / 1000000000ULL),
        .tv_nsec = (long)(deadline_ns % 1000000000ULL),
    };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR) {
    }
}

pid_t cbench_gettid(void) {
    return (pid_t)syscall(SYS_gettid);
}

int64_t cbench_thread_cpu_ns(pid_t tid) {
    // The kernel's CPU-time clock id of a thread, as glibc's pthread_getcpuclockid builds it:
    // MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) = (~tid << 3) | CPUCLOCK_PERTHREAD_MASK | CPUCLOCK_SCHED.
    clockid_t clock = (clockid_t)((~(unsigned)tid << 3) | 4 | 2);
    struct timespec used;
    if (clock_gettime(clock, &used) != 0) {
        return -1;
    }
    return (int64_t)used.tv_sec * 1000000000LL + used.tv_nsec;
}

int cbench_set_timer_slack_ns(unsigned long nanoseconds) {
    return prctl(PR_SET_TIMERSLACK, nanoseconds, 0, 0, 0);
}

int cbench_set_realtime(int priority) {
    struct sched_param parameter = {.sched_priority = priority};
    return sched_setscheduler(0, SCHED_FIFO, &parameter);
}

int cbench_pin_to_last_processor(void) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        return -1;
    }
    for (int processor = CPU_SETSIZE - 1; processor >= 0; processor--) {
        if (CPU_ISSET(processor, &allowed)) {
            cpu_set_t only;
            CPU_ZERO(&only);
            CPU_SET(processor, &only);
            return sched_setaffinity(0, sizeof only, &only) == 0 ? processor : -1;
        }
    }
    return -1;
}

/// The affinity `cbench_pin_process_tree_begin` replaced, for `cbench_pin_process_tree_end`.
static cpu_set_t saved_affinity;
static int has_saved_affinity;

int cbench_pin_process_tree_begin(void) {
    if (sched_getaffinity(0, sizeof saved_affinity, &saved_affinity) != 0) {
        return -1;
    }
    has_saved_affinity = 1;
    return cbench_pin_to_last_processor();
}

int cbench_pin_process_tree_end(void) {
    if (!has_saved_affinity) {
        return -1;
    }
    has_saved_affinity = 0;
    return sched_setaffinity(0, sizeof saved_affinity, &saved_affinity);
}

int cbench_release_free_memory(void) {
#if defined(__GLIBC__)
    return malloc_trim(0);
#else
    return 0;
#endif
}

long cbench_raise_descriptor_limit(long wanted) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
        return -1;
    }
    if ((long)limit.rlim_cur >= wanted) {
        return (long)limit.rlim_cur;
    }
    limit.rlim_cur = (rlim_t)wanted < limit.rlim_max ? (rlim_t)wanted : limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
        return -1;
    }
    return (long)limit.rlim_cur;
}

int cbench_pipe(int fds[2]) {
    return pipe2(fds, O_NONBLOCK | O_CLOEXEC);
}

int cbench_eventfd(void) {
    return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

int cbench_poll_readable(const int *fds, int count, int timeout_ms) {
    struct pollfd set[count];
    for (int i = 0; i < count; i++) {
        set[i].fd = fds[i];
        set[i].events = POLLIN;
        set[i].revents = 0;
    }
    int result;
    do {
        result = poll(set, (nfds_t)count, timeout_ms);
    } while (result < 0 && errno == EINTR);
    return result;
}

int cbench_epoll_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

int cbench_epoll_add_readable(int epfd, int fd) {
    struct epoll_event event = {.events = EPOLLIN, .data = {.fd = fd}};
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event);
}

int cbench_epoll_wait_one(int epfd, int timeout_ms) {
    struct epoll_event event;
    int result;
    do {
        result = epoll_wait(epfd, &event, 1, timeout_ms);
    } while (result < 0 && errno == EINTR);
    return result;
}

int cbench_write_byte(int fd) {
    unsigned char byte = 1;
    ssize_t result;
    do {
        result = write(fd, &byte, 1);
    } while (result < 0 && errno == EINTR);
    return (int)result;
}

long cbench_read_discard(int fd) {
    unsigned char buffer[64];
    ssize_t result;
    do {
        result = read(fd, buffer, sizeof buffer);
    } while (result < 0 && errno == EINTR);
    return (long)result;
}

long cbench_read_byte(int fd) {
    unsigned char byte;
    ssize_t result;
    do {
        result = read(fd, &byte, 1);
    } while (result < 0 && errno == EINTR);
    return (long)result;
}

int cbench_eventfd_signal(int fd) {
    return eventfd_write(fd, 1);
}

int cbench_close(int fd) {
    return close(fd);
}

static long tracepoint_id(const char *tracepoint) {
    static const char *roots[] = {"/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"};
    for (unsigned i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s/id", roots[i], tracepoint);
        FILE *file = fopen(path, "re");
        if (file == NULL) {
            continue;
        }
        long id = -1;
        if (fscanf(file, "%ld", &id) != 1) {
            id = -1;
        }
        fclose(file);
        if (id >= 0) {
            return id;
        }
    }
    errno = ENOENT;
    return -1;
}

int cbench_tracepoint_counter_open(pid_t tid, const char *tracepoint) {
    long id = tracepoint_id(tracepoint);
    if (id < 0) {
        return -1;
    }
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.type = PERF_TYPE_TRACEPOINT;
    attr.size = sizeof attr;
    attr.config = (uint64_t)id;
    attr.disabled = 0;
    attr.exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

int64_t cbench_counter_read(int fd) {
    uint64_t value = 0;
    if (read(fd, &value, sizeof value) != (ssize_t)sizeof value) {
        return -1;
    }
    return (int64_t)value;
}

void cbench_kernel_release(char *buffer, unsigned long size) {
    struct utsname name;
    if (size == 0) {
        return;
    }
    if (uname(&name) != 0) {
        buffer[0] = 0;
        return;
    }
    snprintf(buffer, size, "%s", name.release);
}
int cbench_current_cpu(void) {
    return sched_getcpu();
}
