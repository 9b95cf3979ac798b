// Counts heap allocations by defining the malloc family in the executable itself.
//
// The dynamic linker resolves `malloc` and friends to the first definition in the global scope, and the executable
// comes first: so every allocation in the process (Swift runtime, Foundation, Dispatch, LoopKit) lands here. Each
// call bumps a process-wide and a per-thread counter, then forwards to glibc's own implementation through its
// exported `__libc_*` entry points, so the allocator being measured is the real one. `free` is forwarded uncounted.

#define _GNU_SOURCE
#include "CLoopBench.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *pointer);

static uint64_t process_count;
static __thread uint64_t thread_count;
static int hook_seen;

static inline void count_one(void) {
    __atomic_fetch_add(&process_count, 1, __ATOMIC_RELAXED);
    // Only this thread writes its counter; other threads read it with a relaxed load.
    __atomic_store_n(&thread_count, thread_count + 1, __ATOMIC_RELAXED);
}

void *malloc(size_t size) {
    hook_seen = 1;
    count_one();
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    count_one();
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    count_one();
    return __libc_realloc(pointer, size);
}

void free(void *pointer) {
    __libc_free(pointer);
}

void *memalign(size_t alignment, size_t size) {
    count_one();
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    count_one();
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) {
        return EINVAL;
    }
    count_one();
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL && size != 0) {
        return ENOMEM;
    }
    *result = pointer;
    return 0;
}

void *valloc(size_t size) {
    count_one();
    return __libc_memalign((size_t)sysconf(_SC_PAGESIZE), size);
}

bool cbench_alloc_hook_active(void) {
    // Something in the process has called malloc by the time Swift code runs; if that did not reach the hook,
    // the interposition failed and the counts are meaningless.
    return __atomic_load_n(&hook_seen, __ATOMIC_RELAXED) != 0;
}

uint64_t cbench_alloc_count_process(void) {
    return __atomic_load_n(&process_count, __ATOMIC_RELAXED);
}

const uint64_t *cbench_alloc_counter_of_current_thread(void) {
    return &thread_count;
}

uint64_t cbench_alloc_count_read(const uint64_t *counter) {
    return __atomic_load_n(counter, __ATOMIC_RELAXED);
}
