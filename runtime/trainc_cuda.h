/* trainc_cuda.h — what a .cu trainer of trainc's CUDA backend includes
 * (docs/cuda.md), before trainc.h.
 *
 * Compiled by nvcc, it is the CUDA runtime and cuBLAS. Compiled as host C++
 * with TRC_CUDA_EMULATE defined (`trainc build --backend cuda-emulate`), it
 * is an emulation of the part of them the generated file uses: a launch runs
 * every block and every thread in order on the CPU, device memory is host
 * memory, a strided batched cuBLAS GEMM is the C backend's trc_gemm. The
 * generated kernels need nothing else — no shared memory, no
 * __syncthreads, no atomics — so the emulation runs the very code a GPU
 * would, thread by thread.
 *
 * Then, for both: every call checked (a failure names the call, and for a
 * kernel its model line, and ends the process with status 1), the device
 * arena (one allocation of the planned size) and the copies between it and
 * the runtime's host arena (trc_device in trainc.h). */
#ifndef TRAINC_CUDA_H
#define TRAINC_CUDA_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TRC_CUDA_EMULATE
#include "trainc.h" /* trc_gemm */

#define __global__
#define TRC_DEVICE_NAME "cuda-emulate"

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
/* The launch sets these before it calls the kernel for each thread. */
static dim3 threadIdx, blockIdx, blockDim, gridDim;

typedef enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 } cudaError_t;
typedef enum { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 } cudaMemcpyKind;
static inline const char *cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "out of memory";
}
static inline cudaError_t cudaGetDeviceCount(int *n) { return *n = 1, cudaSuccess; }
static inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
static inline cudaError_t cudaMalloc(void **p, size_t n) {
  *p = aligned_alloc(256, (n + 255) / 256 * 256 + 256);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind) {
  memcpy(dst, src, n);
  return cudaSuccess;
}
static inline cudaError_t cudaMemset(void *dst, int v, size_t n) {
  return memset(dst, v, n), cudaSuccess;
}
static inline cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
static inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }
enum { cudaHostRegisterDefault = 0 };
static inline cudaError_t cudaHostRegister(void *, size_t, unsigned) { return cudaSuccess; }

typedef int cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;
typedef enum { CUBLAS_OP_N, CUBLAS_OP_T } cublasOperation_t;
static inline const char *cublasGetStatusString(cublasStatus_t) { return "success"; }
static inline cublasStatus_t cublasCreate(cublasHandle_t *h) {
  return *h = 1, CUBLAS_STATUS_SUCCESS;
}
/* Column-major, as cuBLAS, on the C trainer's GEMM: the generated call's
 * swapped operands, swapped back, are the C backend's row-major trc_gemm
 * (trainc.h), so the emulation computes its bits. alpha is always 1. */
static inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t, cublasOperation_t ta,
                                                       cublasOperation_t tb, int m, int n, int k,
                                                       const float *alpha, const float *a, int lda,
                                                       long long sa, const float *b, int ldb,
                                                       long long sb, const float *beta, float *c,
                                                       int ldc, long long sc, int batch) {
  (void)alpha;
  trc_gemm(batch, tb == CUBLAS_OP_T, ta == CUBLAS_OP_T, n, m, k, b, ldb, sb, a, lda, sa, *beta, c,
           ldc, sc);
  return CUBLAS_STATUS_SUCCESS;
}

/* Every block, every thread, in order. */
template <typename... Params, typename... Args>
static void trc_launch(void (*kernel)(Params...), dim3 grid, dim3 block, const char *, int,
                       Args... args) {
  gridDim = grid, blockDim = block;
  for (blockIdx.z = 0; blockIdx.z < grid.z; blockIdx.z++)
    for (blockIdx.y = 0; blockIdx.y < grid.y; blockIdx.y++)
      for (blockIdx.x = 0; blockIdx.x < grid.x; blockIdx.x++)
        for (threadIdx.z = 0; threadIdx.z < block.z; threadIdx.z++)
          for (threadIdx.y = 0; threadIdx.y < block.y; threadIdx.y++)
            for (threadIdx.x = 0; threadIdx.x < block.x; threadIdx.x++) kernel(args...);
}

#else /* nvcc */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#define TRC_DEVICE_NAME "cuda"
#endif

/* Ends the process after a failed call: its name, the kernel and model
 * line when there is one, CUDA's reason. */
static void trc_cuda_fail(const char *call, const char *kernel, int line, const char *why) {
  fprintf(stderr, "trainer: error: %s failed", call);
  if (kernel) fprintf(stderr, " in %s (model line %d)", kernel, line);
  fprintf(stderr, ": %s\n", why);
  exit(1);
}
static inline void trc_cuda_check(cudaError_t e, const char *call, const char *kernel, int line) {
  if (e != cudaSuccess) trc_cuda_fail(call, kernel, line, cudaGetErrorString(e));
}
static inline void trc_cublas_check(cublasStatus_t e, const char *call, const char *kernel,
                                    int line) {
  if (e != CUBLAS_STATUS_SUCCESS) trc_cuda_fail(call, kernel, line, cublasGetStatusString(e));
}
/* TRC_CUDA(cudaMemset, (p, 0, n)): the call, checked, named. */
#define TRC_CUDA(fn, args) trc_cuda_check(fn args, #fn, NULL, 0)

#ifndef TRC_CUDA_EMULATE
/* TRAINC_CUDA_SYNC=1 waits for every kernel, so that a failure is reported
 * against the kernel that failed rather than at the next copy. */
static int trc_cuda_sync_each;

template <typename... Params, typename... Args>
static void trc_launch(void (*kernel)(Params...), dim3 grid, dim3 block, const char *name, int line,
                       Args... args) {
  kernel<<<grid, block>>>(args...);
  trc_cuda_check(cudaGetLastError(), "the kernel launch", name, line);
  if (trc_cuda_sync_each)
    trc_cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", name, line);
}
#endif

/* ---- the device arena ---- */

static char *trc_cuda_arena;
static uint64_t trc_cuda_arena_bytes;
static const char *trc_cuda_pinned; /* the host arena, once page-locked */
static cublasHandle_t trc_cublas;

/* One device per rank: the local rank (Open MPI's) modulo the devices. */
static int trc_cuda_start(uint64_t arena_bytes) {
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    fprintf(stderr, "trainer: error: no usable GPU: cudaGetDeviceCount failed: %s\n",
            e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
    return 1;
  }
  const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  TRC_CUDA(cudaSetDevice, ((local ? atoi(local) : 0) % devices));
#ifndef TRC_CUDA_EMULATE
  trc_cuda_sync_each = getenv("TRAINC_CUDA_SYNC") && atoi(getenv("TRAINC_CUDA_SYNC")) != 0;
#endif
  trc_cuda_arena_bytes = arena_bytes;
  TRC_CUDA(cudaMalloc, ((void **)&trc_cuda_arena, arena_bytes));
  TRC_CUDA(cudaMemset, (trc_cuda_arena, 0, arena_bytes));
  trc_cublas_check(cublasCreate(&trc_cublas), "cublasCreate", NULL, 0);
#ifndef TRC_CUDA_EMULATE /* fp32 GEMMs in fp32, not TF32 */
  trc_cublas_check(cublasSetMathMode(trc_cublas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode", NULL,
                   0);
#endif
  return 0;
}

/* The host arena page-locked on first use, so that copies run at full
 * speed without a staging buffer; when the system refuses (locked-memory
 * limits), copies stay pageable. */
static void trc_cuda_pin(const char *arena) {
  if (arena == trc_cuda_pinned) return;
  if (cudaHostRegister((void *)arena, trc_cuda_arena_bytes, cudaHostRegisterDefault) != cudaSuccess)
    (void)cudaGetLastError(); /* clears it */
  trc_cuda_pinned = arena;
}

static void trc_cuda_download(char *arena, uint64_t offset, uint64_t bytes) {
  trc_cuda_pin(arena);
  TRC_CUDA(cudaMemcpy, (arena + offset, trc_cuda_arena + offset, bytes, cudaMemcpyDeviceToHost));
}

static void trc_cuda_upload(const char *arena, uint64_t offset, uint64_t bytes) {
  trc_cuda_pin(arena);
  TRC_CUDA(cudaMemcpy, (trc_cuda_arena + offset, arena + offset, bytes, cudaMemcpyHostToDevice));
}

static void trc_cuda_zero(uint64_t offset, uint64_t bytes) {
  TRC_CUDA(cudaMemset, (trc_cuda_arena + offset, 0, bytes));
}

#endif
