/* codegen.h — backends over the scheduled Program.
 *
 * The whole interface of the codegen stage. Each backend prints (or builds)
 * the very loop nests the op table produced and the Program's step schedule
 * (the order of forward and backward, the gradient buckets); none invents
 * kernels or a schedule of its own: the C backend (c_backend.c, compiled by
 * build.c), the CUDA backend (cuda_backend.c, docs/cuda.md), which shares
 * the C backend's printer (c_family.h), and the LLVM backend
 * (llvm_backend.c and its parts llvm_*.c: LLVM IR built in memory, compiled to an object or run in
 * trainc's process by llvm_jit.c). Nothing from the model file reaches
 * generated code except identifiers (which the scanner restricts to
 * [A-Za-z_][A-Za-z0-9_]*)
 * and numbers; the source path is written with octal escapes (c_backend.c). */
#ifndef TRAINC_CODEGEN_H
#define TRAINC_CODEGEN_H

#include "passes.h"

/* Writes one self-contained C file that includes runtime/trainc.h only: each
 * distinct kernel body once (ir.h's kernel_form), a function of its buffers
 * named by op and value, forward() and backward() as flat lists of calls
 * with pointers named after the model's values (each commented with its
 * layer path and model-file line; backward hands each gradient bucket to its
 * all-reduce once final), the optimizer step step(), and the trc_model
 * descriptor and main() for the runtime (docs/architecture.md, *The
 * generated C*). */
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
  const char *link_libs; /* the libraries the runtime calls (oneDNN, OpenMP) */
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
/* Links an object file (the LLVM backend's) with the runtime, as build_c
 * links a C file: the same compiler driver, flags and libraries. */
bool link_object(const char *obj_path, const char *exe_path, const BuildOptions *opt, Diag *diag);

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

/* ---- the LLVM backend ----
 * Built when trainc is configured with LLVM 19 (TRAINC_LLVM); otherwise each
 * function reports that this trainc was built without LLVM. The module has
 * the same kernels, forward(), backward(), step() and trc_model as emit_c's
 * C, with the same float arithmetic (no contraction into FMAs, no
 * reassociation, the same math functions): with scalar_math its trainers
 * compute bitwise what C trainers built with scalar math compute; by default
 * its loops call libmvec's vector math, as the default C trainers do. Every
 * LLVM error (an unknown CPU or feature, the verifier, a JIT symbol) is a
 * diagnostic. */
typedef struct {
  const char *mcpu;  /* target CPU; NULL: this machine's (LLVMGetHostCPUName) */
  const char *mattr; /* target features, e.g. "+avx2,-avx512f"; NULL: this machine's */
  bool scalar_math;  /* libm's expf, logf, tanhf, erff only: no libmvec vector versions */
  bool time_phases;  /* print the seconds LLVM's phases took on stderr */
  bool verbose;      /* print LLVM's optimization warnings (--verbose) */
} LlvmOptions;

/* Writes the module as LLVM IR text (.ll), verified, before optimization. */
bool emit_llvm(FILE *out, const Program *p, const LlvmOptions *o, Diag *diag);
/* Builds, verifies and optimizes (default<O3>) the module and writes it as
 * an object file for the target, with main() calling trc_main(). */
bool build_llvm(const char *obj_path, const Program *p, const LlvmOptions *o, Diag *diag);
/* `trainc run`: compiles the module with ORC LLJIT in this process and runs
 * the trainer's main with argv (argv[0] is the program's name), against the
 * runtime linked into trainc. Returns the trainer's exit status, or -1 after
 * reporting why it could not run. */
int run_llvm(const Program *p, const LlvmOptions *o, int argc, char **argv, Diag *diag);

#endif
