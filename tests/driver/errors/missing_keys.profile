gemm_flops = 1e11
loop_flops = 8e9
