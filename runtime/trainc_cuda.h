/* trainc_cuda.h — what a .cu trainer of trainc's CUDA backend includes
 * (docs/cuda.md), before trainc.h.
 *
 * Compiled by nvcc, it is the CUDA runtime and cuBLAS. Compiled as host C++
 * with TRC_CUDA_EMULATE defined (`trainc build --backend cuda-emulate`), it
 * is an emulation of the part of them the generated file uses: a launch runs
 * every block and every thread, last first, on the CPU, device memory is host
 * memory, a strided batched cuBLAS GEMM is the C backend's trc_gemm (in
 * fp32, or on bf16 inputs: the C trainer's precision bf16). The
 * generated kernels need nothing else — no shared memory, no
 * __syncthreads, no atomics — so the emulation runs the very code a GPU
 * would, thread by thread.
 *
 * Then, for both: every call checked (a failure names the call, and for a
 * kernel its model line, and ends the process with status 1), the device
 * arena (one allocation of the planned size) and the copies between it and
 * the runtime's host arena (trc_device in trainc.h), the input batches'
 * double buffers, the all-reduces (NCCL, emulated by the runtime's MPI
 * all-reduce), and the step's loss sum, clipping and optimizer on the
 * device. */
#ifndef TRAINC_CUDA_H
#define TRAINC_CUDA_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef TRC_CUDA_EMULATE
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif
#include "trainc.h" /* trc_gemm, the step's calls, the optimizer's arithmetic */
extern "C" {
#include "trainc_rt.h" /* the ranks' communication (trc_comm_*) */
}

/* NCCL where the toolkit has it (nvcc), else the gradients and parameters
 * go through the host's MPI. */
#if !defined(TRC_CUDA_EMULATE) && __has_include(<nccl.h>)
#include <nccl.h>
#define TRC_CUDA_NCCL 1
#endif

#ifdef TRC_CUDA_EMULATE

/* A kernel stays a function of its own, as on a GPU. Inlined into the
 * launch loops (and so into one step function), GCC 12 at -O3 miscompiled
 * tests/e2e/gradcheck/encoder.nn's step: a layernorm gamma gradient came
 * out 0. GCC at -O2, with -fno-ivopts, or with the kernels not inlined,
 * and clang at -O3, computed it right. */
#define __global__ __attribute__((noinline))
#define __device__
#define __host__
#define TRC_DEVICE_NAME "cuda-emulate"

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
/* The launch sets these before it calls the kernel for each thread. */
static dim3 threadIdx, blockIdx, blockDim, gridDim;

typedef enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 } cudaError_t;
typedef enum {
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3
} cudaMemcpyKind;
static inline const char *cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "out of memory";
}
static inline cudaError_t cudaGetDeviceCount(int *n) { return *n = 1, cudaSuccess; }
static inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
static inline cudaError_t cudaMalloc(void **p, size_t n) {
  *p = aligned_alloc(256, (n + 255) / 256 * 256 + 256);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t cudaFree(void *p) { return free(p), cudaSuccess; }
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
/* Streams and events: every call has finished when it returns, so an event
 * is the time it was recorded. */
typedef int cudaStream_t;
typedef double *cudaEvent_t;
enum { cudaStreamNonBlocking = 1, cudaEventDefault = 0, cudaEventDisableTiming = 2 };
static inline cudaError_t cudaMallocHost(void **p, size_t n) { return cudaMalloc(p, n); }
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
  return *s = 1, cudaSuccess;
}
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) {
  *e = (double *)calloc(1, sizeof(double));
  return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  *e = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
  return cudaSuccess;
}
static inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  *ms = (float)(1e3 * (*end - *start));
  return cudaSuccess;
}
static inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) {
  return cudaSuccess;
}
static inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind k,
                                          cudaStream_t) {
  return cudaMemcpy(dst, src, n, k);
}

typedef int cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_SUPPORTED = 15 } cublasStatus_t;
typedef enum { CUBLAS_OP_N, CUBLAS_OP_T } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
static inline const char *cublasGetStatusString(cublasStatus_t e) {
  return e == CUBLAS_STATUS_SUCCESS ? "success" : "the emulation has bf16 x bf16 -> f32 only";
}
static inline cublasStatus_t cublasCreate(cublasHandle_t *h) {
  return *h = 1, CUBLAS_STATUS_SUCCESS;
}
/* Column-major, as cuBLAS, on the C trainer's GEMM: the generated call's
 * swapped operands, swapped back, are the C backend's row-major trc_gemm
 * (trainc.h), so the emulation computes its bits, in the precision given
 * whatever the run's (trc_gemm reads the run's: it is set for this call).
 * alpha is always 1. */
static void trc_emulated_gemm(trc_precision precision, cublasOperation_t ta, cublasOperation_t tb,
                              int m, int n, int k, const float *a, int lda, long long sa,
                              const float *b, int ldb, long long sb, float beta, float *c,
                              int ldc, long long sc, int batch) {
  const trc_precision run = trc_get_precision();
  trc_set_precision(precision);
  trc_gemm(batch, 1, tb == CUBLAS_OP_T, ta == CUBLAS_OP_T, n, m, k, b, ldb, sb, 0, a, lda, sa, 0,
           beta, c, ldc, sc, 0);
  trc_set_precision(run);
}

/* In fp32 (CUBLAS_DEFAULT_MATH: no TF32), as cuBLAS, whatever the run's
 * precision. */
static inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t, cublasOperation_t ta,
                                                       cublasOperation_t tb, int m, int n, int k,
                                                       const float *, const float *a, int lda,
                                                       long long sa, const float *b, int ldb,
                                                       long long sb, const float *beta, float *c,
                                                       int ldc, long long sc, int batch) {
  trc_emulated_gemm(TRC_FP32, ta, tb, m, n, k, a, lda, sa, b, ldb, sb, *beta, c, ldc, sc, batch);
  return CUBLAS_STATUS_SUCCESS;
}

/* A column-major bf16 operand (rows x cols, leading dimension ld, `batch`
 * matrices `stride` apart) as the floats it holds, exactly (a bf16 number
 * is the upper half of a float), in one of two buffers kept for the next
 * call. */
static const float *trc_emulated_widen(int slot, const void *x, int rows, int cols, int ld,
                                       long long stride, int batch) {
  static float *buffers[2];
  static size_t sizes[2];
  const size_t n = (size_t)((batch - 1) * stride + (long long)(cols - 1) * ld + rows);
  if (n > sizes[slot]) {
    free(buffers[slot]);
    if (!(buffers[slot] = (float *)malloc(n * sizeof(float)))) {
      fprintf(stderr, "trainer: error: out of memory in the emulated bf16 GEMM\n");
      exit(1);
    }
    sizes[slot] = n;
  }
  const uint16_t *bf16 = (const uint16_t *)x;
  for (size_t i = 0; i < n; i++) {
    const uint32_t bits = (uint32_t)bf16[i] << 16;
    memcpy(&buffers[slot][i], &bits, sizeof bits);
  }
  return buffers[slot];
}

/* bf16 A and B, f32 C, f32 compute (the one form the generated code calls):
 * the bf16 numbers as floats through trc_gemm under precision bf16, whose
 * rounding to bf16 leaves them as they are, so they are multiplied with f32
 * accumulation by the C trainer's bf16 GEMM (oneDNN's matmul, its
 * partition): the emulated trainer's GEMM is the C trainer's, bitwise. */
static inline cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *,
    const void *a, cudaDataType a_type, int lda, long long sa, const void *b, cudaDataType b_type,
    int ldb, long long sb, const void *beta, void *c, cudaDataType c_type, int ldc, long long sc,
    int batch, cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (a_type != CUDA_R_16BF || b_type != CUDA_R_16BF || c_type != CUDA_R_32F ||
      compute != CUBLAS_COMPUTE_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool a_n = ta == CUBLAS_OP_N, b_n = tb == CUBLAS_OP_N;
  const float *a32 = trc_emulated_widen(0, a, a_n ? m : k, a_n ? k : m, lda, sa, batch);
  const float *b32 = trc_emulated_widen(1, b, b_n ? k : n, b_n ? n : k, ldb, sb, batch);
  trc_emulated_gemm(TRC_BF16, ta, tb, m, n, k, a32, lda, sa, b32, ldb, sb, *(const float *)beta,
                    (float *)c, ldc, sc, batch);
  return CUBLAS_STATUS_SUCCESS;
}

/* NCCL: an in-place float sum is the runtime's all-reduce over MPI (the C
 * trainer's), finished when it returns. */
#define TRC_CUDA_NCCL 1
typedef int ncclComm_t;
typedef enum { ncclSuccess = 0 } ncclResult_t;
typedef enum { ncclFloat = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
typedef struct {
  char internal[128];
} ncclUniqueId;
static inline const char *ncclGetErrorString(ncclResult_t e) {
  return e == ncclSuccess ? "no error" : "the emulation sums in place only";
}
static inline ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  for (int i = 0; i < 128; i++) id->internal[i] = (char)(i * 37 + 11);
  return ncclSuccess;
}
static inline ncclResult_t ncclCommInitRank(ncclComm_t *c, int, ncclUniqueId, int) {
  return *c = 1, ncclSuccess;
}
static inline ncclResult_t ncclAllReduce(const void *send, void *recv, size_t n, ncclDataType_t,
                                         ncclRedOp_t, ncclComm_t, cudaStream_t) {
  if (send != recv) return (ncclResult_t)1; /* the generated code sums in place */
  trc_comm_allreduce_f32((float *)recv, n);
  return ncclSuccess;
}

/* Every block, every thread, one after another, last first: a GPU runs
 * them in no set order, and a kernel whose threads depended on running in
 * order (a race on a GPU: two threads adding into one element, one reading
 * what another writes) would compute other bits than the C trainer's loop
 * in reverse, which e2e.cuda_emulate shows; in order it would agree. */
template <typename... Params, typename... Args>
static void trc_launch(void (*kernel)(Params...), dim3 grid, dim3 block, const char *, int,
                       Args... args) {
  gridDim = grid, blockDim = block;
  for (blockIdx.z = grid.z; blockIdx.z-- > 0;)
    for (blockIdx.y = grid.y; blockIdx.y-- > 0;)
      for (blockIdx.x = grid.x; blockIdx.x-- > 0;)
        for (threadIdx.z = block.z; threadIdx.z-- > 0;)
          for (threadIdx.y = block.y; threadIdx.y-- > 0;)
            for (threadIdx.x = block.x; threadIdx.x-- > 0;) kernel(args...);
}

#else /* nvcc */
#define TRC_DEVICE_NAME "cuda"
#endif

/* Ends the process after a failed call: its name, the kernel and model
 * line when there is one, CUDA's reason. */
static void trc_cuda_fail(const char *call, const char *kernel, int line, const char *why) {
  fprintf(stderr, "trainer: error: %s failed", call);
  if (kernel) fprintf(stderr, " in %s", kernel);
  if (line > 0) fprintf(stderr, " (model line %d)", line); /* the header's kernels have none */
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
#ifdef TRC_CUDA_NCCL
static inline void trc_nccl_check(ncclResult_t e, const char *call) {
  if (e != ncclSuccess) trc_cuda_fail(call, NULL, 0, ncclGetErrorString(e));
}
#endif
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

/* The parameter and gradient regions of the arena; the optimizer's state and
 * the scalars of the step, outside it (as the host keeps them outside its
 * arena). Gradients, optimizer state and averages cover the trained prefix
 * of the parameters (trained_count floats; the rest are frozen). */
static uint64_t trc_cuda_param_offset, trc_cuda_grad_offset, trc_cuda_param_count;
static uint64_t trc_cuda_trained_count;
static float *trc_cuda_m, *trc_cuda_v; /* allocated when the run's optimizer keeps them */
/* DiLoCo's anchor and outer momentum, when the run has an outer optimizer,
 * and the host's arrays they come from and go back to. */
static float *trc_cuda_anchor, *trc_cuda_outer_m, *trc_cuda_host_anchor, *trc_cuda_host_outer_m;
static double *trc_cuda_lanes;         /* the norm's TRC_NORM_BLOCKS x TRC_NORM_LANES sums */
typedef struct {
  double loss_sum, norm;
  float scale;       /* the gradients' clipping factor, 1 when not clipped */
  int64_t bad_block; /* the finite check's first block with a NaN or infinity; -1: none */
} trc_cuda_scalars;
static trc_cuda_scalars *trc_cuda_step_scalars;

/* Where the generated file's arena holds what the step moves. */
typedef struct {
  uint64_t arena_bytes, param_offset, grad_offset, param_count, trained_count;
  uint64_t input_offset, input_bytes; /* a micro-batch's inputs and scalars */
} trc_cuda_layout;

static void trc_cuda_allocate_step(const trc_cuda_layout *l) {
  trc_cuda_param_offset = l->param_offset, trc_cuda_grad_offset = l->grad_offset;
  trc_cuda_param_count = l->param_count, trc_cuda_trained_count = l->trained_count;
  TRC_CUDA(cudaMalloc, ((void **)&trc_cuda_lanes,
                        TRC_NORM_BLOCKS * TRC_NORM_LANES * sizeof(double)));
  TRC_CUDA(cudaMalloc, ((void **)&trc_cuda_step_scalars, sizeof(trc_cuda_scalars)));
}

/* One device per rank: the local rank (Open MPI's) modulo the devices. */
/* ---- input batches: pinned double buffers on a copy stream ----
 * Micro-batch k's inputs, gathered by the runtime into the host arena, are
 * copied into pinned buffer k % 2 and from there, on a copy stream of their
 * own, into device buffer k % 2, while the device still computes micro-batch
 * k - 1; the kernels' stream then waits for that copy and moves the buffer
 * into the arena's input slot (device to device) after k - 1's backward is
 * done with the slot. Events keep a buffer from being refilled before its
 * last copy out of it has run. The emulation runs the same calls, each
 * finished when it returns. */
static cudaStream_t trc_cuda_copy_stream;
static char *trc_cuda_pinned_inputs[2], *trc_cuda_device_inputs[2];
static cudaEvent_t trc_cuda_inputs_up[2];   /* host -> device buffer done */
static cudaEvent_t trc_cuda_inputs_used[2]; /* device buffer -> arena done */
static uint64_t trc_cuda_input_offset, trc_cuda_input_bytes;

static void trc_cuda_allocate_inputs(const trc_cuda_layout *l) {
  trc_cuda_input_offset = l->input_offset, trc_cuda_input_bytes = l->input_bytes;
  TRC_CUDA(cudaStreamCreateWithFlags, (&trc_cuda_copy_stream, cudaStreamNonBlocking));
  for (int b = 0; b < 2; b++) {
    TRC_CUDA(cudaMallocHost, ((void **)&trc_cuda_pinned_inputs[b], l->input_bytes));
    TRC_CUDA(cudaMalloc, ((void **)&trc_cuda_device_inputs[b], l->input_bytes));
    TRC_CUDA(cudaEventCreateWithFlags, (&trc_cuda_inputs_up[b], cudaEventDisableTiming));
    TRC_CUDA(cudaEventCreateWithFlags, (&trc_cuda_inputs_used[b], cudaEventDisableTiming));
  }
}

/* Micro-batch k's inputs and scalars (the arena's input region) to the
 * device's arena, in order with the kernels, without waiting for them. */
static void trc_cuda_upload_inputs(const char *arena, int64_t k) {
  const int b = (int)(k % 2);
  const uint64_t n = trc_cuda_input_bytes;
  char *pinned = trc_cuda_pinned_inputs[b], *device = trc_cuda_device_inputs[b];
  TRC_CUDA(cudaEventSynchronize, (trc_cuda_inputs_up[b])); /* micro-batch k - 2's is gone */
  memcpy(pinned, arena + trc_cuda_input_offset, n);
  TRC_CUDA(cudaStreamWaitEvent, (trc_cuda_copy_stream, trc_cuda_inputs_used[b], 0));
  TRC_CUDA(cudaMemcpyAsync, (device, pinned, n, cudaMemcpyHostToDevice, trc_cuda_copy_stream));
  TRC_CUDA(cudaEventRecord, (trc_cuda_inputs_up[b], trc_cuda_copy_stream));
  TRC_CUDA(cudaStreamWaitEvent, ((cudaStream_t)0, trc_cuda_inputs_up[b], 0));
  TRC_CUDA(cudaMemcpyAsync, (trc_cuda_arena + trc_cuda_input_offset, device, n,
                             cudaMemcpyDeviceToDevice, (cudaStream_t)0));
  TRC_CUDA(cudaEventRecord, (trc_cuda_inputs_used[b], (cudaStream_t)0));
}

/* ---- the ranks' all-reduces on the device (NCCL) ----
 * One communicator per job, its unique id sent from rank 0 over MPI; sums
 * in place on the device's gradient or parameter region, on a stream of
 * their own that waits for the kernels before it (an event) and that the
 * kernels wait for when the sums are needed. TRAINC_CUDA_NCCL=0, one rank,
 * or a toolkit without NCCL: the host's MPI, through copies. */
static int trc_cuda_nccl_on;
#ifdef TRC_CUDA_NCCL
static ncclComm_t trc_cuda_nccl;
static cudaStream_t trc_cuda_comm_stream;
static cudaEvent_t trc_cuda_comm_ready, trc_cuda_comm_done;
/* Timing events on the communication stream, two per all-reduce started
 * since the sums were last waited for: its start and its end. */
static cudaEvent_t *trc_cuda_comm_marks;
static int trc_cuda_comm_started, trc_cuda_comm_marks_made;

/* The id from rank 0 to every rank as a sum of bytes in which the other
 * ranks give zeros (exact in double). */
static void trc_cuda_share_id(ncclUniqueId *id) {
  double bytes[sizeof id->internal];
  for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++)
    bytes[i] = trc_comm_rank() == 0 ? (double)(unsigned char)id->internal[i] : 0.0;
  trc_comm_allreduce_f64(bytes, sizeof bytes / sizeof bytes[0]);
  for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++)
    id->internal[i] = (char)(unsigned char)bytes[i];
}

static void trc_cuda_start_nccl(void) {
  const char *off = getenv("TRAINC_CUDA_NCCL");
  if (trc_comm_size() < 2 || (off && atoi(off) == 0)) return;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (trc_comm_rank() == 0) trc_nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  trc_cuda_share_id(&id);
  trc_nccl_check(ncclCommInitRank(&trc_cuda_nccl, trc_comm_size(), id, trc_comm_rank()),
                 "ncclCommInitRank");
  TRC_CUDA(cudaStreamCreateWithFlags, (&trc_cuda_comm_stream, cudaStreamNonBlocking));
  TRC_CUDA(cudaEventCreateWithFlags, (&trc_cuda_comm_ready, cudaEventDisableTiming));
  TRC_CUDA(cudaEventCreateWithFlags, (&trc_cuda_comm_done, cudaEventDisableTiming));
  trc_cuda_nccl_on = 1;
}

/* Sums floats [0, count) at `data` over the ranks, after the kernels
 * launched so far, without making the kernels wait. */
/* The next all-reduce's two timing events, made on first use. */
static cudaEvent_t *trc_cuda_comm_pair(void) {
  const int n = 2 * trc_cuda_comm_started++;
  if (n == trc_cuda_comm_marks_made) {
    trc_cuda_comm_marks =
        (cudaEvent_t *)realloc(trc_cuda_comm_marks, (size_t)(n + 2) * sizeof(cudaEvent_t));
    if (!trc_cuda_comm_marks) trc_cuda_fail("realloc", NULL, 0, "out of memory");
    for (int i = n; i < n + 2; i++)
      TRC_CUDA(cudaEventCreateWithFlags, (&trc_cuda_comm_marks[i], cudaEventDefault));
    trc_cuda_comm_marks_made = n + 2;
  }
  return &trc_cuda_comm_marks[n];
}

static void trc_cuda_allreduce_start(float *data, uint64_t count) {
  cudaEvent_t *marks = trc_cuda_comm_pair();
  TRC_CUDA(cudaEventRecord, (trc_cuda_comm_ready, (cudaStream_t)0));
  TRC_CUDA(cudaStreamWaitEvent, (trc_cuda_comm_stream, trc_cuda_comm_ready, 0));
  TRC_CUDA(cudaEventRecord, (marks[0], trc_cuda_comm_stream));
  trc_nccl_check(ncclAllReduce(data, data, count, ncclFloat, ncclSum, trc_cuda_nccl,
                               trc_cuda_comm_stream),
                 "ncclAllReduce");
  TRC_CUDA(cudaEventRecord, (marks[1], trc_cuda_comm_stream));
}

/* The kernels launched from now on wait for the sums started. Returns the
 * seconds those ran on the communication stream (the log's sync seconds,
 * as the host's MPI time: waiting for the other ranks included); the host
 * waits for them here (it waits for the gradients' norm a few kernels
 * later anyway). */
static double trc_cuda_allreduce_wait(void) {
  TRC_CUDA(cudaEventRecord, (trc_cuda_comm_done, trc_cuda_comm_stream));
  TRC_CUDA(cudaStreamWaitEvent, ((cudaStream_t)0, trc_cuda_comm_done, 0));
  TRC_CUDA(cudaEventSynchronize, (trc_cuda_comm_done));
  double seconds = 0.0;
  for (int i = 0; i < trc_cuda_comm_started; i++) {
    float ms;
    TRC_CUDA(cudaEventElapsedTime,
             (&ms, trc_cuda_comm_marks[2 * i], trc_cuda_comm_marks[2 * i + 1]));
    seconds += 1e-3 * ms;
  }
  trc_cuda_comm_started = 0;
  return seconds;
}
#else
static void trc_cuda_start_nccl(void) {}
static void trc_cuda_allreduce_start(float *, uint64_t) {}
static double trc_cuda_allreduce_wait(void) { return 0.0; }
#endif

static int trc_cuda_start(const trc_cuda_layout *l) {
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
  trc_cuda_arena_bytes = l->arena_bytes;
  TRC_CUDA(cudaMalloc, ((void **)&trc_cuda_arena, l->arena_bytes));
  TRC_CUDA(cudaMemset, (trc_cuda_arena, 0, l->arena_bytes));
  trc_cuda_allocate_step(l);
  trc_cuda_allocate_inputs(l);
  trc_cuda_start_nccl();
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

/* ---- the optimizer step on the device ----
 * Parameters and optimizer state stay on the device from the first step on;
 * the host's copies are made current only when the runtime reads them
 * (trc_device's host_current: evaluation, saving, parameter averages), and
 * taken again after it wrote them (host_changed). Per step the host reads
 * the loss (before the update: a non-finite loss stops the run without one)
 * and the gradients' norm. The kernels make the host's arithmetic in the
 * host's order (trc_sgd_element, trc_adamw_element, the norm's order of
 * additions in trainc.h), so the emulation is bitwise the C trainer's. */

static int trc_cuda_resident; /* the device holds the parameters and optimizer state */
static int trc_cuda_ahead;    /* and they are newer than the host's */

/* Parameter floats [first, first + count) of the parameter region, all with
 * weight decay or all without. */
typedef struct {
  uint64_t first, count;
  int decayed;
} trc_cuda_run;

static __global__ void trc_add_loss_kernel(trc_cuda_scalars *s, const float *loss, int first) {
  s->loss_sum = (first ? 0.0 : s->loss_sum) + (double)*loss;
}

/* Thread t sums lane t % TRC_NORM_LANES of block t / TRC_NORM_LANES. */
static __global__ void trc_norm_lanes_kernel(const float *g, uint64_t n, uint64_t block,
                                             double *lanes) {
  const uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint64_t start = t / TRC_NORM_LANES * block;
  if (start >= n) return;
  const uint64_t end = start + block < n ? start + block : n;
  double sum = 0.0;
  for (uint64_t i = start + t % TRC_NORM_LANES; i < end; i += TRC_NORM_LANES)
    sum += (double)g[i] * g[i];
  lanes[t] = sum;
}

/* One thread: each block's lanes folded in halves, the blocks in order; the
 * norm, and the clipping factor as PyTorch's clip_grad_norm_ computes it. */
static __global__ void trc_norm_kernel(const double *lanes, uint64_t blocks, double max_norm,
                                       trc_cuda_scalars *s) {
  double sum = 0.0;
  for (uint64_t b = 0; b < blocks; b++) {
    double lane[TRC_NORM_LANES];
    for (int l = 0; l < TRC_NORM_LANES; l++) lane[l] = lanes[b * TRC_NORM_LANES + l];
    for (int w = TRC_NORM_LANES / 2; w > 0; w /= 2)
      for (int l = 0; l < w; l++) lane[l] += lane[l + w];
    sum += lane[0];
  }
  s->norm = sqrt(sum);
  s->scale = max_norm > 0.0 && s->norm > max_norm ? (float)(max_norm / (s->norm + 1e-6)) : 1.0f;
}

/* One thread: the first block whose lane sums of squares (trc_norm_lanes_kernel)
 * are not finite, -1 when all are: a float's square is finite in double, so
 * a lane's sum is finite exactly when its floats are. */
static __global__ void trc_bad_block_kernel(const double *lanes, uint64_t blocks,
                                            trc_cuda_scalars *s) {
  int64_t bad = -1;
  for (uint64_t b = 0; b < blocks && bad < 0; b++)
    for (int l = 0; l < TRC_NORM_LANES; l++)
      if (!isfinite(lanes[b * TRC_NORM_LANES + l])) bad = (int64_t)b;
  s->bad_block = bad;
}

static __global__ void trc_clip_kernel(float *g, uint64_t n, const trc_cuda_scalars *s) {
  const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && s->scale != 1.0f) g[i] *= s->scale; /* times 1 would change nothing */
}

static __global__ void trc_sgd_kernel(float *p, const float *g, float *buf, uint64_t n,
                                      trc_update_scalars u, float weight_decay) {
  const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) trc_sgd_element(&p[i], g[i], buf ? &buf[i] : NULL, u.lr, u.momentum, weight_decay,
                             u.nesterov);
}

static __global__ void trc_adamw_kernel(float *p, const float *g, float *m, float *v, uint64_t n,
                                        trc_update_scalars u, float decay) {
  const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) trc_adamw_element(&p[i], g[i], &m[i], &v[i], decay, &u);
}

static dim3 trc_cuda_grid(uint64_t threads) { return dim3((unsigned)((threads + 255) / 256)); }

/* One of the optimizer's state vectors up, allocated on first use. */
static void trc_cuda_state_up(float **device, const float *host) {
  const uint64_t bytes = trc_cuda_trained_count * sizeof(float);
  if (!host) return;
  if (!*device) TRC_CUDA(cudaMalloc, ((void **)device, bytes));
  TRC_CUDA(cudaMemcpy, (*device, host, bytes, cudaMemcpyHostToDevice));
}

static void trc_cuda_state_down(float *host, const float *device) {
  if (host && device)
    TRC_CUDA(cudaMemcpy, (host, device, trc_cuda_trained_count * sizeof(float),
                          cudaMemcpyDeviceToHost));
}

/* Before a step: the host's parameters and optimizer state, unless the
 * device holds them already. */
static void trc_cuda_take_host_state(trc_step *s, const char *arena) {
  if (trc_cuda_resident) return;
  float *m, *v;
  trc_step_optimizer_state(s, &m, &v);
  trc_step_outer_state(s, &trc_cuda_host_anchor, &trc_cuda_host_outer_m);
  trc_cuda_upload(arena, trc_cuda_param_offset, trc_cuda_param_count * sizeof(float));
  trc_cuda_state_up(&trc_cuda_m, m);
  trc_cuda_state_up(&trc_cuda_v, v);
  trc_cuda_state_up(&trc_cuda_anchor, trc_cuda_host_anchor);
  trc_cuda_state_up(&trc_cuda_outer_m, trc_cuda_host_outer_m);
  trc_cuda_resident = 1;
}

static void trc_cuda_host_current(char *arena, float *m, float *v) {
  if (!trc_cuda_ahead) return;
  trc_cuda_download(arena, trc_cuda_param_offset, trc_cuda_param_count * sizeof(float));
  trc_cuda_state_down(m, trc_cuda_m);
  trc_cuda_state_down(v, trc_cuda_v);
  trc_cuda_state_down(trc_cuda_host_anchor, trc_cuda_anchor);
  trc_cuda_state_down(trc_cuda_host_outer_m, trc_cuda_outer_m);
  trc_cuda_ahead = 0;
}

static void trc_cuda_host_changed(void) { trc_cuda_resident = 0; }

/* The runtime's check before a sync, on the device (NCCL): floats [first,
 * first + count) of `region` (the gradients, or the parameters) in the
 * norm's blocks; the first block holding a NaN or infinity, if any, comes
 * down to the runtime, which names the parameter and element and ends every
 * rank (trc_step_stop_unless_finite). The host waits for the kernels up to
 * here to read 8 bytes. */
static void trc_cuda_stop_unless_finite(trc_step *s, const float *region, uint64_t first,
                                        uint64_t count, trc_check_what what) {
  const float *x = region + first;
  const uint64_t block = trc_norm_block(count), blocks = (count + block - 1) / block;
  trc_launch(trc_norm_lanes_kernel, trc_cuda_grid(blocks * TRC_NORM_LANES), dim3(256),
             "trc_norm_lanes_kernel", 0, x, count, block, trc_cuda_lanes);
  trc_launch(trc_bad_block_kernel, dim3(1), dim3(1), "trc_bad_block_kernel", 0,
             (const double *)trc_cuda_lanes, blocks, trc_cuda_step_scalars);
  int64_t bad;
  TRC_CUDA(cudaMemcpy, (&bad, &trc_cuda_step_scalars->bad_block, sizeof bad,
                        cudaMemcpyDeviceToHost));
  if (bad < 0) return;
  const uint64_t start = (uint64_t)bad * block, n = count - start < block ? count - start : block;
  float *values = (float *)malloc(n * sizeof(float));
  if (!values) trc_cuda_fail("malloc", NULL, 0, "out of memory");
  TRC_CUDA(cudaMemcpy, (values, x + start, n * sizeof(float), cudaMemcpyDeviceToHost));
  trc_step_stop_unless_finite(s, values, first + start, n, what);
  free(values); /* not reached: the block has a NaN or infinity */
}

/* Micro-batch k's loss (at `offset`) into the window's sum, in double. */
static void trc_cuda_add_loss(uint64_t offset, int64_t k) {
  trc_launch(trc_add_loss_kernel, dim3(1), dim3(1), "trc_add_loss_kernel", 0,
             trc_cuda_step_scalars, (const float *)(trc_cuda_arena + offset), (int)(k == 0));
}

static double trc_cuda_loss_sum(void) {
  double sum;
  TRC_CUDA(cudaMemcpy, (&sum, &trc_cuda_step_scalars->loss_sum, sizeof sum,
                        cudaMemcpyDeviceToHost));
  return sum;
}

/* The gradients' norm, clipping, and one update of every run of parameters;
 * the norm to the runtime's log. */
static void trc_cuda_update(trc_step *s, const trc_cuda_run *runs, int n_runs) {
  const trc_update_scalars u = trc_step_update_scalars(s);
  float *p = (float *)(trc_cuda_arena + trc_cuda_param_offset);
  float *g = (float *)(trc_cuda_arena + trc_cuda_grad_offset);
  const uint64_t n = trc_cuda_trained_count, block = trc_norm_block(n);
  const uint64_t blocks = (n + block - 1) / block;
  trc_launch(trc_norm_lanes_kernel, trc_cuda_grid(blocks * TRC_NORM_LANES), dim3(256),
             "trc_norm_lanes_kernel", 0, (const float *)g, n, block, trc_cuda_lanes);
  trc_launch(trc_norm_kernel, dim3(1), dim3(1), "trc_norm_kernel", 0,
             (const double *)trc_cuda_lanes, blocks, u.clip_norm, trc_cuda_step_scalars);
  if (u.clip_norm > 0.0)
    trc_launch(trc_clip_kernel, trc_cuda_grid(n), dim3(256), "trc_clip_kernel", 0, g, n,
               (const trc_cuda_scalars *)trc_cuda_step_scalars);
  for (int r = 0; r < n_runs; r++) {
    const trc_cuda_run *run = &runs[r];
    const uint64_t f = run->first;
    if (u.kind == TRC_SGD)
      trc_launch(trc_sgd_kernel, trc_cuda_grid(run->count), dim3(256), "trc_sgd_kernel", 0, p + f,
                 (const float *)(g + f), trc_cuda_m ? trc_cuda_m + f : (float *)NULL, run->count,
                 u, run->decayed ? u.weight_decay : 0.0f);
    else
      trc_launch(trc_adamw_kernel, trc_cuda_grid(run->count), dim3(256), "trc_adamw_kernel", 0,
                 p + f, (const float *)(g + f), trc_cuda_m + f, trc_cuda_v + f, run->count, u,
                 run->decayed ? u.decay : 1.0f);
  }
  trc_cuda_ahead = 1;
  double norm;
  TRC_CUDA(cudaMemcpy, (&norm, &trc_cuda_step_scalars->norm, sizeof norm,
                        cudaMemcpyDeviceToHost));
  trc_step_set_grad_norm(s, norm);
}


/* ---- the GEMMs ----
 * Every GEMM of the generated file, column-major as cuBLAS takes it (the
 * row-major product's operands swapped: cuda_backend.c), in the run's
 * precision, read per call (trc_set_precision: the config's `precision`,
 * fp32 during --gradcheck). fp32: cublasSgemmStridedBatched, with
 * CUBLAS_DEFAULT_MATH (no TF32). bf16: A and B rounded to bf16 by the
 * runtime's rounding (trc_round_bf16, as the C trainer's) into packed
 * scratch copies on the device, then cublasGemmStridedBatchedEx on bf16
 * inputs with f32 compute and an f32 C. Not CUBLAS_COMPUTE_32F_FAST_16BF
 * on the f32 operands: that "allows down-converting inputs to bfloat16 or
 * TF32" (cublas_api.h), rounded as cuBLAS does it, so neither the inputs'
 * precision nor their rounding would be sure to be the C trainer's. */

/* A column-major operand's floats (matrices of rows x cols, leading
 * dimension ld, `stride` apart) rounded to bf16 and packed, n in all, one
 * thread per element. */
static __global__ void trc_round_bf16_kernel(const float *x, uint64_t rows, uint64_t cols,
                                             uint64_t ld, uint64_t stride, uint64_t n,
                                             uint16_t *out) {
  const uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const uint64_t matrix = t / (rows * cols), col = t / rows % cols, row = t % rows;
  out[t] = trc_round_bf16(x[matrix * stride + col * ld + row]);
}

/* An operand's bf16 copy: where, its leading dimension and stride. */
typedef struct {
  const uint16_t *data;
  int ld;
  long long stride;
} trc_cuda_bf16_operand;

/* Operand x (rows x cols stored, leading dimension ld, `batch` matrices
 * `stride` apart) rounded into scratch buffer `slot` (0: A, 1: B), which
 * grows to the largest operand (during the first step: cudaFree waits for
 * the device) and is kept; the GEMMs run in order on one stream, so the
 * next GEMM's copy cannot overwrite one still being read. */
static trc_cuda_bf16_operand trc_cuda_round_operand(int slot, const float *x, int rows, int cols,
                                                    int ld, long long stride, int batch) {
  static uint16_t *buffers[2];
  static uint64_t sizes[2];
  const uint64_t matrices = stride ? (uint64_t)batch : 1;
  const uint64_t n = matrices * (uint64_t)rows * (uint64_t)cols;
  if (n > sizes[slot]) {
    if (buffers[slot]) TRC_CUDA(cudaFree, (buffers[slot]));
    TRC_CUDA(cudaMalloc, ((void **)&buffers[slot], n * sizeof(uint16_t)));
    sizes[slot] = n;
  }
  trc_launch(trc_round_bf16_kernel, trc_cuda_grid(n), dim3(256), "trc_round_bf16_kernel", 0, x,
             (uint64_t)rows, (uint64_t)cols, (uint64_t)ld, (uint64_t)stride, n, buffers[slot]);
  return {buffers[slot], rows, stride ? (long long)rows * cols : 0};
}

/* C = op(A) op(B) + beta C for `batch` column-major matrices, op(A) m x k,
 * in the run's precision unless f32 (then in f32, as the C trainer's
 * trc_gemm_f32); a failure names the GEMM's kernel and model line. */
static void trc_cuda_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                          const float *a, int lda, long long sa, const float *b, int ldb,
                          long long sb, float beta, float *c, int ldc, long long sc, int batch,
                          int f32, const char *kernel, int line) {
  static const float one = 1.0f;
  if (trc_get_precision() != TRC_BF16 || f32 || m == 0 || n == 0 || k == 0) { /* as trc_gemm */
    trc_cublas_check(cublasSgemmStridedBatched(trc_cublas, ta, tb, m, n, k, &one, a, lda, sa, b,
                                               ldb, sb, &beta, c, ldc, sc, batch),
                     "cublasSgemmStridedBatched", kernel, line);
    return;
  }
  const bool a_n = ta == CUBLAS_OP_N, b_n = tb == CUBLAS_OP_N;
  const trc_cuda_bf16_operand a16 =
      trc_cuda_round_operand(0, a, a_n ? m : k, a_n ? k : m, lda, sa, batch);
  const trc_cuda_bf16_operand b16 =
      trc_cuda_round_operand(1, b, b_n ? k : n, b_n ? n : k, ldb, sb, batch);
  trc_cublas_check(cublasGemmStridedBatchedEx(trc_cublas, ta, tb, m, n, k, &one, a16.data,
                                              CUDA_R_16BF, a16.ld, a16.stride, b16.data,
                                              CUDA_R_16BF, b16.ld, b16.stride, &beta, c,
                                              CUDA_R_32F, ldc, sc, batch, CUBLAS_COMPUTE_32F,
                                              CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx", kernel, line);
}


/* ---- evaluation's counts on the device ----
 * An evaluation batch's predictions stay on the device: one thread per label
 * row takes its argmax and cross-entropy (trainc.h's trc_argmax_row and
 * trc_cross_entropy_row, the host's), one thread adds the rows in order
 * into the counts (trc_metrics_add's, bitwise), which come down once per
 * evaluation. */
typedef struct {
  uint64_t predict_offset, label_offset; /* in the arena */
  int64_t classes, rows;                 /* rows: a batch's label rows */
  int labels_u8;                         /* u8 labels, else i32 */
} trc_cuda_eval_layout;
static trc_cuda_eval_layout trc_cuda_eval;
static int64_t *trc_cuda_eval_pred; /* per row: argmax */
static double *trc_cuda_eval_ce;    /* per row: cross-entropy */
/* [examples, correct, true_pos[k], false_pos[k], false_neg[k], then the
 * confusion matrix when kept], and the cross-entropy sum */
static int64_t *trc_cuda_eval_sums;
static double *trc_cuda_eval_ce_sum;

static uint64_t trc_cuda_eval_count(void) {
  const int64_t k = trc_cuda_eval.classes;
  return (uint64_t)(2 + 3 * k + (k <= TRC_CONFUSION_MAX_CLASSES ? k * k : 0));
}

static void trc_cuda_eval_zero(void) {
  TRC_CUDA(cudaMemset, (trc_cuda_eval_sums, 0, trc_cuda_eval_count() * sizeof(int64_t)));
  TRC_CUDA(cudaMemset, (trc_cuda_eval_ce_sum, 0, sizeof(double)));
}

static void trc_cuda_eval_start(const trc_cuda_eval_layout *l) {
  trc_cuda_eval = *l;
  TRC_CUDA(cudaMalloc, ((void **)&trc_cuda_eval_pred, (size_t)l->rows * sizeof(int64_t)));
  TRC_CUDA(cudaMalloc, ((void **)&trc_cuda_eval_ce, (size_t)l->rows * sizeof(double)));
  TRC_CUDA(cudaMalloc, ((void **)&trc_cuda_eval_sums, trc_cuda_eval_count() * sizeof(int64_t)));
  TRC_CUDA(cudaMalloc, ((void **)&trc_cuda_eval_ce_sum, sizeof(double)));
  trc_cuda_eval_zero();
}

static __device__ __host__ inline int64_t trc_eval_label(const char *arena,
                                                          trc_cuda_eval_layout l, int64_t r) {
  return l.labels_u8 ? (int64_t)((const uint8_t *)(arena + l.label_offset))[r]
                     : (int64_t)((const int32_t *)(arena + l.label_offset))[r];
}

static __global__ void trc_eval_rows_kernel(const char *arena, trc_cuda_eval_layout l,
                                            int64_t rows, int64_t *pred, double *ce) {
  const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float *x = (const float *)(arena + l.predict_offset) + r * l.classes;
  const int64_t y = trc_eval_label(arena, l, r);
  pred[r] = trc_argmax_row(x, l.classes);
  ce[r] = y >= 0 && y < l.classes ? trc_cross_entropy_row(x, l.classes, y) : 0.0;
}

/* One thread: the rows in order, as trc_metrics_add counts them. */
static __global__ void trc_eval_count_kernel(const char *arena, trc_cuda_eval_layout l,
                                             int64_t rows, const int64_t *pred, const double *ce,
                                             int64_t *sums, double *ce_sum) {
  const int64_t k = l.classes;
  int64_t *true_pos = sums + 2, *false_pos = true_pos + k, *false_neg = false_pos + k;
  int64_t *confusion = k <= TRC_CONFUSION_MAX_CLASSES ? false_neg + k : NULL;
  for (int64_t r = 0; r < rows; r++) {
    const int64_t y = trc_eval_label(arena, l, r), p = pred[r];
    if (y < 0 || y >= k) continue; /* an ignored label */
    sums[0]++;
    *ce_sum += ce[r];
    if (p == y) {
      sums[1]++;
      true_pos[y]++;
    } else {
      false_pos[p]++;
      false_neg[y]++;
    }
    if (confusion) confusion[y * k + p]++;
  }
}

/* After an evaluation batch's forward on the device: its first `rows` label
 * rows counted. */
static void trc_cuda_eval_add(int64_t rows) {
  trc_launch(trc_eval_rows_kernel, trc_cuda_grid((uint64_t)rows), dim3(256),
             "trc_eval_rows_kernel", 0, (const char *)trc_cuda_arena, trc_cuda_eval, rows,
             trc_cuda_eval_pred, trc_cuda_eval_ce);
  trc_launch(trc_eval_count_kernel, dim3(1), dim3(1), "trc_eval_count_kernel", 0,
             (const char *)trc_cuda_arena, trc_cuda_eval, rows,
             (const int64_t *)trc_cuda_eval_pred, (const double *)trc_cuda_eval_ce,
             trc_cuda_eval_sums, trc_cuda_eval_ce_sum);
}

/* The counts since the last call, added to the host's (trc_device's
 * eval_counts), and zeroed. */
static void trc_cuda_eval_counts(int64_t *examples, int64_t *correct, int64_t *true_pos,
                                 int64_t *false_pos, int64_t *false_neg, int64_t *confusion,
                                 double *ce_sum) {
  const uint64_t n = trc_cuda_eval_count();
  const int64_t k = trc_cuda_eval.classes;
  int64_t *sums = (int64_t *)malloc(n * sizeof(int64_t));
  if (!sums) trc_cuda_fail("malloc", NULL, 0, "out of memory");
  double ce;
  TRC_CUDA(cudaMemcpy, (sums, trc_cuda_eval_sums, n * sizeof(int64_t), cudaMemcpyDeviceToHost));
  TRC_CUDA(cudaMemcpy, (&ce, trc_cuda_eval_ce_sum, sizeof ce, cudaMemcpyDeviceToHost));
  *examples += sums[0], *correct += sums[1], *ce_sum += ce;
  for (int64_t c = 0; c < k; c++) {
    true_pos[c] += sums[2 + c];
    false_pos[c] += sums[2 + k + c];
    false_neg[c] += sums[2 + 2 * k + c];
  }
  for (int64_t c = 0; confusion && c < k * k; c++) confusion[c] += sums[2 + 3 * k + c];
  free(sums);
  trc_cuda_eval_zero();
}

/* ---- the step's communication ----
 * What the runtime's trc_step_bucket_ready, trc_step_wait_gradients,
 * trc_step_allreduce_gradients and trc_step_average_parameters do, for a
 * device: with NCCL, on the device's regions; else the gradients go down to
 * the runtime's all-reduce and come back up, and the parameters and
 * optimizer state go through host_current and host_changed. */

static float *trc_cuda_gradients(uint64_t first) {
  return (float *)(trc_cuda_arena + trc_cuda_grad_offset) + first;
}

static void trc_cuda_step_bucket_ready(trc_step *s, uint64_t first, uint64_t count) {
  if (trc_cuda_nccl_on) {
    trc_cuda_stop_unless_finite(s, trc_cuda_gradients(0), first, count, TRC_CHECK_GRADIENTS);
    trc_cuda_allreduce_start(trc_cuda_gradients(first), count);
    return;
  }
  trc_cuda_download(trc_step_arena(s), trc_cuda_grad_offset + first * sizeof(float),
                    count * sizeof(float));
  trc_step_bucket_ready(s, first, count);
}

static void trc_cuda_upload_gradients(trc_step *s) {
  trc_cuda_upload(trc_step_arena(s), trc_cuda_grad_offset,
                  trc_cuda_trained_count * sizeof(float));
}

static void trc_cuda_step_wait_gradients(trc_step *s) {
  if (trc_cuda_nccl_on) {
    trc_step_device_synced(s, trc_cuda_trained_count, trc_cuda_allreduce_wait());
    return;
  }
  trc_step_wait_gradients(s);
  trc_cuda_upload_gradients(s);
}

static void trc_cuda_step_allreduce_gradients(trc_step *s) {
  if (trc_cuda_nccl_on) {
    trc_cuda_stop_unless_finite(s, trc_cuda_gradients(0), 0, trc_cuda_trained_count,
                                TRC_CHECK_GRADIENTS);
    trc_cuda_allreduce_start(trc_cuda_gradients(0), trc_cuda_trained_count);
    trc_cuda_step_wait_gradients(s);
    return;
  }
  trc_cuda_download(trc_step_arena(s), trc_cuda_grad_offset,
                    trc_cuda_trained_count * sizeof(float));
  trc_step_allreduce_gradients(s);
  trc_cuda_upload_gradients(s);
}

static __global__ void trc_divide_kernel(float *x, uint64_t n, float ranks) {
  const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] /= ranks; /* as the runtime's average */
}

static __global__ void trc_outer_kernel(float *x, float *anchor, float *momentum, uint64_t n,
                                        trc_outer_scalars o) {
  const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) trc_outer_element(&x[i], &anchor[i], &momentum[i], o);
}

/* LocalSGD's average on the device, of the parameters and, with `sync
 * parameters optimizer_state`, of the optimizer's state (each array summed
 * in place and divided by the ranks: the runtime's arithmetic on its staged
 * copy), after the runtime's checks in its order; then DiLoCo's outer step
 * when the run has one (trc_outer_element, the runtime's). */
static void trc_cuda_step_average_parameters(trc_step *s) {
  const int with_state = trc_step_averages_with_state(s);
  if (!trc_cuda_nccl_on) {
    trc_step_average_parameters(s);
    return;
  }
  const uint64_t n = trc_cuda_trained_count;
  float *arrays[3] = {(float *)(trc_cuda_arena + trc_cuda_param_offset)};
  int count = 1;
  if (with_state && trc_cuda_m) arrays[count++] = trc_cuda_m;
  if (with_state && trc_cuda_v) arrays[count++] = trc_cuda_v;
  for (int a = 0; a < count; a++)
    trc_cuda_stop_unless_finite(s, arrays[a], 0, n, a ? TRC_CHECK_STATE : TRC_CHECK_PARAMETERS);
  for (int a = 0; a < count; a++) trc_cuda_allreduce_start(arrays[a], n);
  const double seconds = trc_cuda_allreduce_wait();
  for (int a = 0; a < count; a++)
    trc_launch(trc_divide_kernel, trc_cuda_grid(n), dim3(256), "trc_divide_kernel", 0, arrays[a],
               n, (float)trc_comm_size());
  if (trc_cuda_anchor)
    trc_launch(trc_outer_kernel, trc_cuda_grid(n), dim3(256), "trc_outer_kernel", 0, arrays[0],
               trc_cuda_anchor, trc_cuda_outer_m, n, trc_step_outer_scalars(s));
  trc_step_device_synced(s, (uint64_t)count * n, seconds);
  trc_step_parameters_averaged(s);
}

#endif
