/* parallel.c — the trainer's threads (trainc.h): a pool of its own, on
 * which the loop kernels, the runtime's flat loops and the GEMMs run (each
 * GEMM cut by trc_gemm into single-threaded oneDNN calls). Idle workers
 * spin a few microseconds, so that back-to-back kernels do not pay a
 * wake-up, then sleep on a condition variable: nothing spins between steps
 * or on a busy machine. (OpenMP's libgomp spins far longer unless
 * OMP_WAIT_POLICY=passive, which a program cannot set for itself: with it, a
 * fashion_mlp step took 97 ms on 2 threads against 16 ms on 1 on a loaded
 * machine, 28 ms with passive waiting.) oneDNN, built with OpenMP, follows
 * the calling thread's OpenMP setting: one thread. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "rt_kernels.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

enum { SPIN = 4000 }; /* polls before a waiting thread sleeps (tens of microseconds) */

typedef struct {
  int threads; /* the caller and threads - 1 workers */
  pthread_t *workers;
  pthread_mutex_t lock;
  pthread_cond_t wake, done;
  atomic_uint_fast64_t generation; /* one more per job */
  atomic_int pending;              /* workers that have not finished the job */
  atomic_int stop;
  trc_loop_body body; /* the job */
  void *ctx;
  int64_t n;
  int parts;
} pool;

static pool the_pool = {.threads = 1,
                        .lock = PTHREAD_MUTEX_INITIALIZER,
                        .wake = PTHREAD_COND_INITIALIZER,
                        .done = PTHREAD_COND_INITIALIZER};
static _Thread_local int in_body; /* a body calling trc_parallel_for runs it alone */

static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Subnormal floats flushed to zero on this thread: results (FTZ) and
 * operands (DAZ), as TensorFlow's and XLA's CPU threads run. Each subnormal
 * result otherwise costs a microcode assist of ~100 cycles: deep_mlp's AdamW
 * pass, whose (1 - beta2) * g * g falls below 2^-126 for gradients under
 * 3.5e-18, took 6.6-6.8 ms more a step (docs/trainer.md, "Subnormal floats"). */
static void flush_subnormals_on_this_thread(void) {
#if defined(__x86_64__) || defined(__i386__)
  enum { FTZ = 0x8000, DAZ = 0x0040 };
  _mm_setcsr(_mm_getcsr() | FTZ | DAZ);
#endif
}

/* Every thread of the pool computes alike: oneDNN's GEMMs and convolutions
 * on one thread (its OpenMP build reads this thread's OpenMP setting), and
 * subnormals flushed. */
static void prepare_this_thread(void) {
#ifdef _OPENMP
  omp_set_num_threads(1);
#endif
  flush_subnormals_on_this_thread();
}

/* Block t of [0, n) cut into `parts` (trainc.h). */
static int64_t block_start(int64_t n, int parts, int t) {
  int64_t q = n / parts, r = n % parts;
  return t * q + (t < r ? t : r);
}

static void run_block(pool *p, int t) {
  if (t >= p->parts) return;
  int64_t lo = block_start(p->n, p->parts, t), hi = block_start(p->n, p->parts, t + 1);
  in_body = 1;
  if (lo < hi) p->body(p->ctx, lo, hi);
  in_body = 0;
}

/* Waits until *value differs from `from` (spinning, then sleeping on cond). */
static void wait_change(pool *p, atomic_uint_fast64_t *value, uint64_t from, pthread_cond_t *cond) {
  for (int i = 0; i < SPIN; i++) {
    if (atomic_load(value) != from || atomic_load(&p->stop)) return;
    relax();
  }
  pthread_mutex_lock(&p->lock);
  while (atomic_load(value) == from && !atomic_load(&p->stop)) pthread_cond_wait(cond, &p->lock);
  pthread_mutex_unlock(&p->lock);
}

typedef struct {
  pool *p;
  int index;
} worker_arg;

static void *worker(void *arg) {
  worker_arg a = *(worker_arg *)arg;
  free(arg);
  pool *p = a.p;
  prepare_this_thread();
  uint64_t seen = 0;
  for (;;) {
    wait_change(p, &p->generation, seen, &p->wake);
    if (atomic_load(&p->stop)) return NULL;
    seen = atomic_load(&p->generation);
    run_block(p, a.index);
    if (atomic_fetch_sub(&p->pending, 1) == 1) {
      pthread_mutex_lock(&p->lock);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->lock);
    }
  }
}

static void pool_stop(pool *p) {
  if (p->threads <= 1) return;
  pthread_mutex_lock(&p->lock);
  atomic_store(&p->stop, 1);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  for (int i = 0; i < p->threads - 1; i++) pthread_join(p->workers[i], NULL);
  free(p->workers);
  p->workers = NULL;
  p->threads = 1;
  atomic_store(&p->stop, 0);
}

/* Starts threads - 1 workers; on failure keeps those it started. */
static void pool_start(pool *p, int threads) {
  p->workers = calloc((size_t)threads, sizeof *p->workers);
  atomic_store(&p->generation, 0);
  for (int i = 1; i < threads && p->workers; i++) {
    worker_arg *a = malloc(sizeof *a);
    if (!a) break;
    *a = (worker_arg){p, i};
    if (pthread_create(&p->workers[i - 1], NULL, worker, a) != 0) {
      free(a);
      break;
    }
    p->threads = i + 1;
  }
}

/* The CPUs this process may run on; 0 when the mask cannot be read. */
static int affinity_cpus(void) {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
}

int trc_machine_cpus(void) {
  static atomic_int cpus; /* 0: not read yet */
  int n = atomic_load(&cpus);
  if (n == 0) {
    n = affinity_cpus();
    n = n < 1 ? 1 : n;
    atomic_store(&cpus, n);
  }
  return n;
}

/* The default: OMP_NUM_THREADS when set, else the CPUs this process may
 * run on. */
static int default_threads(void) {
  const char *env = getenv("OMP_NUM_THREADS");
  int n = env ? atoi(env) : 0;
  if (n < 1) n = affinity_cpus();
  return n < 1 ? 1 : n > TRC_MAX_THREADS ? TRC_MAX_THREADS : n;
}

void trc_set_threads(int n) {
  if (n < 1) n = default_threads();
  prepare_this_thread();
  if (n == the_pool.threads) return;
  pool_stop(&the_pool);
  if (n > 1) pool_start(&the_pool, n);
}

int trc_threads(void) { return the_pool.threads; }

void trc_parallel_for(int64_t n, trc_loop_body body, void *ctx) {
  pool *p = &the_pool;
  if (n <= 0) return;
  if (p->threads <= 1 || n == 1 || in_body) {
    body(ctx, 0, n);
    return;
  }
  p->body = body, p->ctx = ctx, p->n = n;
  p->parts = n < p->threads ? (int)n : p->threads;
  atomic_store(&p->pending, p->threads - 1);
  pthread_mutex_lock(&p->lock);
  atomic_fetch_add(&p->generation, 1);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  run_block(p, 0);
  for (int i = 0; i < SPIN && atomic_load(&p->pending) > 0; i++) relax();
  pthread_mutex_lock(&p->lock);
  while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done, &p->lock);
  pthread_mutex_unlock(&p->lock);
}
