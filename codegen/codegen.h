/* codegen.h — backends over the scheduled Program.
 *
 * The whole interface of the codegen stage. Each backend prints (or builds)
 * the very loop nests the op table produced and the Program's step schedule
 * (the order of forward and backward, the gradient buckets); none invents
 * kernels or a schedule of its own. Today: the C backend and the CUDA backend
 * (docs/cuda.md), which share one printer (c_family.h). Nothing from the model file reaches generated code
 * except identifiers (which the scanner restricts to [A-Za-z_][A-Za-z0-9_]*)
 * and numbers; the source path is written with octal escapes (c_backend.c). */
#ifndef TRAINC_CODEGEN_H
#define TRAINC_CODEGEN_H

#include "passes.h"

/* Writes one self-contained C file that includes runtime/trainc.h only: one
 * static function per kernel (arena offsets as literals), forward() and
 * backward() as flat lists of calls (each commented with its model-file
 * line; backward hands each gradient bucket to its all-reduce once final),
 * the optimizer step step(), and the trc_model descriptor and main() for the
 * runtime. */
void emit_c(FILE *out, const Program *p);

/* Writes the same program as one CUDA file that includes runtime/trainc_cuda.h
 * and trainc.h: the loop nests as __global__ kernels, GEMMs as cuBLAS calls,
 * forward/backward/step() of emit_c on a device arena, with the copies
 * between it and the runtime's host arena (docs/cuda.md). */
void emit_cuda(FILE *out, const Program *p);

typedef struct {
  const char *cc;        /* C compiler; NULL: $CC, else "cc" */
  const char *cflags;    /* e.g. "-O3 -march=native" */
  const char *rt_include;/* folder of trainc.h */
  const char *rt_lib;    /* libtrainc_rt.a, or libtrainc_rt_mpi.a for MPI */
  const char *blas_lib;  /* BLAS to link, e.g. "-lopenblas" or a path */
  const char *mpi_libs;  /* MPI's libraries when rt_lib is the MPI runtime; else NULL */
  bool verbose;          /* print the compiler command */
  /* build_cuda: */
  const char *cxx;       /* emulation: C++ compiler; NULL: $CXX, else "c++" */
  const char *nvcc;      /* nvcc; NULL or "": this trainc has no CUDA toolkit */
  const char *cuda_libs; /* cudart and cuBLAS, as linker flags */
} BuildOptions;

/* Compiles a C file written by emit_c into an executable. Returns true on
 * success; on failure the compiler's own messages have been shown and
 * trainc's (it could not run, it failed) reported through diag. With
 * opt->verbose the command is printed where diag's messages go. */
bool build_c(const char *c_path, const char *exe_path, const BuildOptions *opt, Diag *diag);

/* Compiles a .cu written by emit_cuda: with nvcc (cflags are nvcc's, e.g.
 * "-O3 -arch=sm_90") to an object the C++ compiler links, or with emulate as
 * host C++ under TRC_CUDA_EMULATE (cflags are the C++ compiler's); linked
 * like build_c's trainers. */
bool build_cuda(const char *cu_path, const char *exe_path, const BuildOptions *opt, bool emulate,
                Diag *diag);

/* `trainc calibrate`: builds a small benchmark with the same compiler, flags
 * and BLAS as trainers, runs it and reads back the machine profile it
 * measures (GEMM FLOP/s, loop FLOP/s, memory bandwidth, call overhead). */
bool calibrate_machine(const BuildOptions *opt, MachineProfile *profile, Diag *diag);

#endif
