// Host memory (memory.c) beyond the public halide_malloc / halide_free and cache controls: the
// cache's process hooks (exit, fork, prefault). Layer core (runtime/layers.txt). Not installed,
// not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_CORE_MEMORY_H
#define TALLY_RUNTIME_SRC_CORE_MEMORY_H

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// Hands the cached free blocks back to the system (at exit).
void tally_malloc_cache_shutdown(void);
// Fork handlers: prepare takes the cache lock, parent and child release it.
void tally_malloc_fork_prepare(void);
void tally_malloc_fork_parent(void);
void tally_malloc_fork_child(void);
void tally_malloc_prefault(void);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_CORE_MEMORY_H
