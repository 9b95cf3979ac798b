#ifndef CLOOPBENCH_H
#define CLOOPBENCH_H

// The Linux calls loop-bench needs that Swift's Glibc module leaves out or makes awkward, and the counting malloc.
// Every function returns -1 and leaves errno set on failure, unless it says otherwise.

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

// MARK: Heap allocations (alloc_hook.c)

/// Whether this executable's malloc family is the one the process uses (the interposition took effect).
bool cbench_alloc_hook_active(void);
/// Allocations (malloc, calloc, realloc, memalign, posix_memalign, aligned_alloc, valloc) made by the whole process.
uint64_t cbench_alloc_count_process(void);
/// The calling thread's allocation counter. The pointer stays valid until the thread exits; read it from another
/// thread with `cbench_alloc_count_read`.
const uint64_t *cbench_alloc_counter_of_current_thread(void);
/// Reads a counter returned by `cbench_alloc_counter_of_current_thread` (a relaxed atomic load).
uint64_t cbench_alloc_count_read(const uint64_t *counter);

// MARK: Time and threads (system.c)

/// CLOCK_MONOTONIC in nanoseconds (clock_gettime(2)); the clock LoopKit, Dispatch's uptime and the kernel timers use.
uint64_t cbench_now_ns(void);
/// Sleeps until the CLOCK_MONOTONIC instant `deadline_ns` (clock_nanosleep(2) with TIMER_ABSTIME), retrying EINTR.
void cbench_sleep_until_ns(uint64_t deadline_ns);
/// The calling thread's kernel id (gettid(2)).
pid_t cbench_gettid(void);
/// CPU time used so far by thread `tid` of this process, in nanoseconds (the thread's CPU-time clock), or -1.
int64_t cbench_thread_cpu_ns(pid_t tid);
/// The calling thread's timer slack (prctl(2) PR_SET_TIMERSLACK).
int cbench_set_timer_slack_ns(unsigned long nanoseconds);
/// Puts the calling thread in the real-time class (sched_setscheduler(2), SCHED_FIFO at `priority`), as display
/// link threads run on other systems. Needs root or CAP_SYS_NICE.
int cbench_set_realtime(int priority);
/// Raises the soft limit on open descriptors to `wanted` (or the hard limit, if lower). Returns the new soft limit.
long cbench_raise_descriptor_limit(long wanted);

// MARK: Descriptors for the floor (system.c)

/// A non-blocking, close-on-exec pipe (pipe2(2)).
int cbench_pipe(int fds[2]);
/// A non-blocking, close-on-exec eventfd with counter 0 (eventfd(2)).
int cbench_eventfd(void);
/// Blocks in poll(2) until one of `fds` (all watched for POLLIN) is readable. Returns the ready count.
int cbench_poll_readable(const int *fds, int count, int timeout_ms);
/// An epoll instance (epoll_create1(2) with EPOLL_CLOEXEC).
int cbench_epoll_create(void);
/// Adds `fd` to `epfd`, watching for readability (epoll_ctl(2)).
int cbench_epoll_add_readable(int epfd, int fd);
/// Blocks in epoll_wait(2) for one event. Returns the ready count.
int cbench_epoll_wait_one(int epfd, int timeout_ms);
/// write(2) of one byte.
int cbench_write_byte(int fd);
/// read(2) of up to 64 bytes, discarded. Returns what read returned.
long cbench_read_discard(int fd);
/// Adds 1 to an eventfd (eventfd_write(3)).
int cbench_eventfd_signal(int fd);
/// close(2).
int cbench_close(int fd);
/// The CPU the calling thread runs on (sched_getcpu(3)).
int cbench_current_cpu(void);

// MARK: System-call counting (system.c)

/// Opens a counter of the kernel tracepoint `tracepoint` (such as "raw_syscalls/sys_enter" or
/// "syscalls/sys_enter_write") for thread `tid` of this process: perf_event_open(2) on the tracepoint's id from
/// tracefs. Needs root or perf_event_paranoid <= -1 and a mounted tracefs; returns -1 otherwise.
int cbench_tracepoint_counter_open(pid_t tid, const char *tracepoint);
/// The counter's value, or -1. The read(2) that fetches it is itself counted by a system-call counter on the
/// calling thread.
int64_t cbench_counter_read(int fd);

// MARK: Machine (system.c)

/// The kernel release (uname(2)), copied into `buffer`.
void cbench_kernel_release(char *buffer, unsigned long size);

#ifdef __cplusplus
}
#endif

#endif
