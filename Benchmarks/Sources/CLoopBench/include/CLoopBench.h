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
/// Keeps the calling thread on the highest-numbered processor it may run on (sched_setaffinity(2)). Returns that
/// processor, or -1 where the affinity cannot be read or set.
int cbench_pin_to_last_processor(void);
/// `cbench_pin_to_last_processor`, keeping the calling thread's affinity for `cbench_pin_process_tree_end`: threads
/// and processes started in between inherit the one processor. One at a time; returns the processor, or -1.
int cbench_pin_process_tree_begin(void);
/// Gives the calling thread back the affinity `cbench_pin_process_tree_begin` kept. Returns 0, or -1.
int cbench_pin_process_tree_end(void);
/// Gives the memory that the allocator holds free back to the system (glibc's malloc_trim(3)); 0 where there is none.
int cbench_release_free_memory(void);
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
/// read(2) of one byte, discarded: one call per byte written, however many are waiting. Returns what read returned.
long cbench_read_byte(int fd);
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

// MARK: Loopback TCP for the echo scenario (socket.c)

/// What the socket calls below return when the call would block (EAGAIN): nothing to read, no room to write, or no
/// connection waiting.
#define CBENCH_WOULD_BLOCK (-2)

/// A non-blocking, close-on-exec TCP listener on 127.0.0.1, on an ephemeral port (socket(2), bind(2), listen(2)).
/// Stores the port in `port` and returns the descriptor.
int cbench_tcp_listen_loopback(int *port);
/// Accepts one waiting connection, non-blocking, close-on-exec, with TCP_NODELAY (accept4(2)). Returns the
/// descriptor, CBENCH_WOULD_BLOCK when none is waiting, or -1.
int cbench_tcp_accept(int listener);
/// Connects to 127.0.0.1:`port` (connect(2), blocking), then makes the socket non-blocking with TCP_NODELAY.
/// Returns the descriptor, close-on-exec, or -1.
int cbench_tcp_connect_loopback(int port);
/// recv(2) into `buffer`, retrying EINTR. Returns the count, 0 at the end of the stream, CBENCH_WOULD_BLOCK, or -1.
long cbench_recv(int fd, void *buffer, unsigned long size);
/// send(2) with MSG_NOSIGNAL (a closed peer is an error, not SIGPIPE), retrying EINTR. Returns the count,
/// CBENCH_WOULD_BLOCK, or -1.
long cbench_send(int fd, const void *buffer, unsigned long size);

/// One descriptor epoll reported ready: the token it was registered with, and what it is ready for. An error or a
/// hang-up counts as readable, so that the next recv(2) reports it.
typedef struct {
    uint64_t token;
    bool readable;
    bool writable;
} cbench_ready_event;

/// Registers `fd` with `epfd` (epoll_ctl(2) EPOLL_CTL_ADD, level-triggered) for readability, and for writability
/// too when `writable`, under `token`.
int cbench_epoll_watch(int epfd, int fd, uint64_t token, bool writable);
/// Changes the interest of a registered `fd` (epoll_ctl(2) EPOLL_CTL_MOD), as `cbench_epoll_watch`.
int cbench_epoll_rewatch(int epfd, int fd, uint64_t token, bool writable);
/// Waits in epoll_wait(2) for up to `capacity` events, retrying EINTR. Returns the ready count (0 on timeout).
int cbench_epoll_wait_ready(int epfd, cbench_ready_event *events, int capacity, int timeout_ms);

// MARK: Child processes and SIGTERM for the echo scenario (process.c)

/// Starts `path` with `argv` (NULL-terminated; argv[0] included) and this process's environment, its standard output
/// a pipe whose read end, close-on-exec, is stored in `stdout_fd`; standard error is shared (posix_spawn(3)). The
/// child starts with no signal blocked and SIGTERM at its default action. Returns the child's pid, or -1.
pid_t cbench_spawn(const char *path, char *const argv[], int *stdout_fd);
/// Reads one line from `fd` into `buffer` (without the newline, NUL-terminated), waiting up to `timeout_ms` in all
/// (poll(2), read(2) a byte at a time, so that nothing after the line is consumed). Returns the line's length,
/// -1 when the output ended or failed first, or CBENCH_WOULD_BLOCK when no whole line came in time.
long cbench_read_line(int fd, char *buffer, unsigned long size, int timeout_ms);
/// Sends SIGTERM (kill(2)).
int cbench_terminate(pid_t pid);
/// Sends SIGKILL (kill(2)).
int cbench_kill(pid_t pid);
/// Waits up to `timeout_ms` for child `pid` to end and reaps it (waitpid(2) with WNOHANG, polled every
/// millisecond). Returns 1 when it exited, with the exit status in `code`; 2 when a signal ended it, with the
/// signal's number in `code`; 0 when it was still running at the timeout; -1 on error.
int cbench_wait_exit(pid_t pid, int timeout_ms, int *code);
/// CPU time used so far by process `pid`, all its threads, user and system, in nanoseconds (/proc/PID/stat; clock
/// ticks, 10 ms resolution on most kernels), or -1.
int64_t cbench_process_cpu_ns(pid_t pid);
/// Blocks SIGTERM in the calling thread (pthread_sigmask(3)); threads started afterwards inherit the mask, so that
/// `cbench_wait_sigterm` receives it. Also asks for SIGTERM when the parent goes away (prctl(2) PR_SET_PDEATHSIG: when
/// the thread that spawned this process exits), so that a server never outlives the benchmark that started it.
int cbench_block_sigterm(void);
/// Waits for a SIGTERM blocked by `cbench_block_sigterm` (sigwait(3)).
int cbench_wait_sigterm(void);

// MARK: Machine (system.c)

/// The kernel release (uname(2)), copied into `buffer`.
void cbench_kernel_release(char *buffer, unsigned long size);

#ifdef __cplusplus
}
#endif

#endif
