# trainc machine profile
gemm_flops = 1e11
loop_flops = 8e9
  bandwidth = fast
kernel_overhead = 2e-6
