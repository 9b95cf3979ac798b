#ifndef CLOOPKIT_SYSTEM_H
#define CLOOPKIT_SYSTEM_H

// The system calls LoopKit needs that Swift's Glibc module does not export. Each wrapper is a thin inline
// call; errno is left as the call set it, for the Swift side to read.

#include <stdint.h>
#include <stdbool.h>
#include <poll.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/// ppoll(2) with a relative timeout in nanoseconds; a negative timeout waits until a descriptor is ready.
/// On systems without ppoll, poll(2) with the timeout rounded up to a whole millisecond (never early).
int cloopkit_poll_ns(struct pollfd *fds, unsigned long count, int64_t timeout_ns);

/// pipe2(2) with O_NONBLOCK | O_CLOEXEC on both ends (pipe + fcntl where pipe2 does not exist).
int cloopkit_pipe_nonblocking(int fds[2]);

/// accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC, the peer's address not asked for (accept + fcntl where accept4
/// does not exist).
int cloopkit_accept_nonblocking(int listener);

/// socket(2) of type SOCK_STREAM in `domain` (AF_INET, AF_INET6, AF_UNIX) with SOCK_NONBLOCK | SOCK_CLOEXEC (socket +
/// fcntl where those flags do not exist); -1 with errno set.
int cloopkit_stream_socket_nonblocking(int domain);

/// epoll_create1(2) with EPOLL_CLOEXEC; -1 with errno ENOSYS where there is no epoll.
int cloopkit_epoll_create(void);

/// The operations of `cloopkit_epoll_control` (EPOLL_CTL_ADD, _MOD, _DEL).
#define CLOOPKIT_EPOLL_ADD 0
#define CLOOPKIT_EPOLL_MODIFY 1
#define CLOOPKIT_EPOLL_REMOVE 2

/// epoll's event bits, for `cloopkit_epoll_control` and `cloopkit_epoll_wait` (EPOLLIN, EPOLLOUT, EPOLLERR,
/// EPOLLHUP), without including sys/epoll.h where there is none.
#define CLOOPKIT_EPOLL_IN 0x001u
#define CLOOPKIT_EPOLL_OUT 0x004u
#define CLOOPKIT_EPOLL_ERR 0x008u
#define CLOOPKIT_EPOLL_HUP 0x010u

/// epoll_ctl(2) on `fd`, with the descriptor itself as the event's data: one of the CLOOPKIT_EPOLL_ADD, _MODIFY and
/// _REMOVE operations, watching `events` (CLOOPKIT_EPOLL_IN, _OUT; level-triggered; error and hang-up are always
/// reported).
int cloopkit_epoll_control(int epoll_fd, int operation, int fd, uint32_t events);

/// epoll_wait(2) for up to `timeout_ms` milliseconds (0: without blocking; negative: until one is ready): the
/// descriptors that are ready (up to `capacity`, at most 64) and their events (CLOOPKIT_EPOLL_IN, _OUT, _ERR, _HUP).
/// Returns the count, or -1 with errno set.
int cloopkit_epoll_wait(int epoll_fd, int *fds, uint32_t *events, int capacity, int timeout_ms);

/// read(2) of a timerfd's expiry count, which clears the expiry; -1 with errno EAGAIN when it has not expired.
int cloopkit_timerfd_clear(int fd);

/// timerfd_create(2) on CLOCK_MONOTONIC with TFD_NONBLOCK | TFD_CLOEXEC; -1 with errno ENOSYS elsewhere.
int cloopkit_timerfd_create(void);

/// timerfd_settime(2) with TFD_TIMER_ABSTIME: one expiry at the CLOCK_MONOTONIC instant `deadline_ns`, or disarmed
/// for 0. Either way the descriptor's expiry count is reset, so it stops being readable.
int cloopkit_timerfd_arm(int fd, uint64_t deadline_ns);

/// A futex word's value, read atomically (acquire).
uint32_t cloopkit_futex_load(const uint32_t *word);

/// Adds one to the futex word (release), then wakes one thread waiting on it (FUTEX_WAKE, process-private).
/// Returns 0, or -1 with errno set (ENOSYS where there is no futex).
int cloopkit_futex_increment_and_wake(uint32_t *word);

/// Sleeps while the futex word holds `expected` (FUTEX_WAIT_BITSET, process-private), until the CLOCK_MONOTONIC
/// instant `deadline_ns` (UINT64_MAX: no deadline). Returns 0 when woken (maybe spuriously), 1 when the deadline
/// passed (ETIMEDOUT: a repeating timer's every wait ends so, so it is not reported as an error), or -1 with errno
/// EAGAIN (the word did not hold `expected`), EINTR, or ENOSYS where there is no futex.
int cloopkit_futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline_ns);

/// Whether the calling thread is the process's main thread.
bool cloopkit_is_main_thread(void);

/// Names the calling thread (pthread_setname_np(3)); `name` is truncated to what the system allows.
void cloopkit_set_thread_name(const char *name);

/// The descriptor that libdispatch makes readable while its main queue has work for a run loop that owns the main
/// thread (`_dispatch_get_main_queue_handle_4CF`, looked up at run time, as CFRunLoop uses it), or -1 where this
/// libdispatch has none. The first call puts the main queue in run-loop mode.
int cloopkit_main_queue_handle(void);

/// Drains the main queue on the main thread: reads `handle` (an eventfd on Linux, which it resets) and runs the
/// queue's pending work (`_dispatch_main_queue_callback_4CF`).
void cloopkit_main_queue_drain(int handle);

/// Writes the message for error number `code` (strerror_r(3), safe from any thread) into `buffer` of `size` bytes,
/// terminated by a zero; "unknown error N" when the system has none.
void cloopkit_error_message(int code, char *buffer, unsigned long size);

/// Copies the calling thread's name (at most `size` bytes with the terminating zero) into `buffer`; returns 0, or an
/// error number (pthread_getname_np(3)).
int cloopkit_thread_name(char *buffer, unsigned long size);

/// Adds a listener for `signo`: each delivery is counted for it and writes a byte to `write_fd`. The first listener
/// of a signal installs the handler (sigaction(2) with `SA_RESTART`); each unblocks the signal in the calling
/// thread's mask. Returns the listener's ticket (0 or more: its slot and that slot's generation), or -1 with errno set
/// (`EINVAL` for a signal that cannot be caught, a fault signal such as SIGSEGV, whose handler would return into the
/// faulting instruction for ever, or one out of range; `EBUSY` when the signal already has 16 listeners).
int cloopkit_signal_install(int signo, int write_fd);

/// Removes the listener with `ticket` (once; a later call does nothing); the last listener of `signo` gives it back the
/// disposition it had before the first, unless a handler installed since replaced LoopKit's (that one stays; should it
/// call LoopKit's, the delivery goes on to the disposition LoopKit replaced). The signal stays unblocked in the threads
/// that installed listeners. Returns once no handler call can still write to the listener's descriptor, so the caller
/// may close it, with the deliveries counted for the listener and not taken (0 for a later call): none is counted after
/// it returns.
uint64_t cloopkit_signal_uninstall(int signo, int ticket);

/// The deliveries of `signo` counted for the listener with `ticket` since the last call; 0 once it is removed, even
/// when a new listener has its slot.
uint64_t cloopkit_signal_take(int signo, int ticket);

/// Lowers the calling thread's timer slack to `nanoseconds` (prctl(PR_SET_TIMERSLACK)); 0 where unsupported.
int cloopkit_set_timer_slack(unsigned long nanoseconds);

/// Asks the scheduler for a time slice of `nanoseconds` for the calling thread (sched_setattr(2) `sched_runtime` of
/// a SCHED_OTHER thread: EEVDF's custom slice, Linux 6.12 and later, 100 µs to 100 ms). A shorter slice gives the
/// thread an earlier virtual deadline, so that when it wakes it preempts the CPU's current thread instead of waiting
/// behind it. Keeps the thread's policy and nice value. Returns 0, or -1 with errno set (ENOSYS elsewhere).
int cloopkit_set_scheduler_slice(uint64_t nanoseconds);

/// The calling thread's timer slack in nanoseconds (prctl(2) PR_GET_TIMERSLACK); -1 where unsupported.
long cloopkit_timer_slack(void);

/// The processor the calling thread runs on (sched_getcpu(3)); -1 where unsupported.
int cloopkit_current_processor(void);

/// The calling thread's scheduler slice in nanoseconds (sched_getattr(2) `sched_runtime`: 0 for a SCHED_OTHER thread
/// on kernels before 6.12); -1 where unsupported.
int64_t cloopkit_scheduler_slice(void);

/// The bytes of heap malloc has handed out and not taken back (glibc's mallinfo2 `uordblks`), for the tests that check
/// loops give back what they allocate; -1 where the C library does not keep it.
int64_t cloopkit_heap_in_use(void);

/// The usable size of the heap block at `address` (malloc_usable_size(3); malloc_size on Darwin), or -1 where
/// neither exists. For tests that keep a size assumption honest.
int64_t cloopkit_allocation_size(const void *address);

/// Asks the CPU to start loading the cache line at `address`, for reading (`__builtin_prefetch`). A hint: it never
/// faults, whatever `address` is, and changes nothing but timing.
static inline void cloopkit_prefetch_read(const void *address) {
    __builtin_prefetch(address, 0, 3);
}

/// As `cloopkit_prefetch_read`, for a line about to be written (a reference count, a lock).
static inline void cloopkit_prefetch_write(const void *address) {
    __builtin_prefetch(address, 1, 3);
}

/// Does nothing, out of the Swift optimizer's sight: a call it cannot see into may release any object, so no retain
/// or release is moved across it. `WordLock` releases its word between two (see there). Not inline, on purpose.
void cloopkit_reference_count_fence(void);

#ifdef __cplusplus
}
#endif

#endif
