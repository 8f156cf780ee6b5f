; ModuleID = 'm'
source_filename = "tests/e2e/gradcheck/linear_relu.nn"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

%trc_param = type { ptr, i32, [8 x i64], i64, i64, i32, float, float, i64, i64, i32, i32, ptr, i32 }
%trc_input = type { ptr, i32, i32, [8 x i64], i64, i64, i64 }
%trc_kernel_site = type { ptr, ptr, i32, [2 x [3 x double]] }
%trc_model = type { ptr, ptr, i64, i64, i64, i64, i64, i64, i64, i64, ptr, ptr, i32, ptr, i32, ptr, i64, i64, i32, i32, i64, i64, i64, i32, i64, i64, i64, i32, i32, i32, i32, i32, i64, i64, i64, ptr, ptr, ptr, ptr, i32, ptr, [2 x double], i32, %trc_train_config, ptr }
%trc_train_config = type { i64, i64, i64, i32, double, double, double, double, double, double, i32, i32, i64, double, double, i64, i32, i64, i32, i64, double, i64, i64, i32, i32, i32, double, double, i32 }

@.str = private unnamed_addr constant [2 x i8] c"m\00"
@.str.1 = private unnamed_addr constant [35 x i8] c"tests/e2e/gradcheck/linear_relu.nn\00"
@.str.2 = private unnamed_addr constant [9 x i8] c"h.weight\00"
@.str.3 = private unnamed_addr constant [7 x i8] c"h.bias\00"
@.str.4 = private unnamed_addr constant [14 x i8] c"logits.weight\00"
@.str.5 = private unnamed_addr constant [12 x i8] c"logits.bias\00"
@params = internal constant [4 x %trc_param] [%trc_param { ptr @.str.2, i32 2, [8 x i64] [i64 7, i64 5, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0], i64 0, i64 35, i32 3, float 0xBFDC9F25C0000000, float 0x3FDC9F25C0000000, i64 5, i64 7, i32 1, i32 0, ptr null, i32 0 }, %trc_param { ptr @.str.3, i32 1, [8 x i64] [i64 7, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0], i64 192, i64 7, i32 3, float 0xBFDC9F25C0000000, float 0x3FDC9F25C0000000, i64 5, i64 7, i32 0, i32 0, ptr null, i32 0 }, %trc_param { ptr @.str.4, i32 2, [8 x i64] [i64 3, i64 7, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0], i64 256, i64 21, i32 3, float 0xBFD83091E0000000, float 0x3FD83091E0000000, i64 7, i64 3, i32 1, i32 0, ptr null, i32 0 }, %trc_param { ptr @.str.5, i32 1, [8 x i64] [i64 3, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0], i64 384, i64 3, i32 3, float 0xBFD83091E0000000, float 0x3FD83091E0000000, i64 7, i64 3, i32 0, i32 0, ptr null, i32 0 }]
@.str.6 = private unnamed_addr constant [2 x i8] c"x\00"
@.str.7 = private unnamed_addr constant [6 x i8] c"label\00"
@inputs = internal constant [2 x %trc_input] [%trc_input { ptr @.str.6, i32 0, i32 2, [8 x i64] [i64 4, i64 5, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0], i64 896, i64 20, i64 0 }, %trc_input { ptr @.str.7, i32 1, i32 1, [8 x i64] [i64 4, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0], i64 1024, i64 4, i64 3 }]
@.str.8 = private unnamed_addr constant [4 x i8] c"off\00"
@.str.9 = private unnamed_addr constant [7 x i8] c"matmul\00"
@.str.10 = private unnamed_addr constant [5 x i8] c"relu\00"
@.str.11 = private unnamed_addr constant [2 x i8] c"h\00"
@.str.12 = private unnamed_addr constant [7 x i8] c"matmul\00"
@.str.13 = private unnamed_addr constant [4 x i8] c"add\00"
@.str.14 = private unnamed_addr constant [7 x i8] c"logits\00"
@.str.15 = private unnamed_addr constant [10 x i8] c"logsumexp\00"
@.str.16 = private unnamed_addr constant [14 x i8] c"cross_entropy\00"
@.str.17 = private unnamed_addr constant [5 x i8] c"loss\00"
@.str.18 = private unnamed_addr constant [19 x i8] c"cross_entropy_grad\00"
@.str.19 = private unnamed_addr constant [7 x i8] c"sum_to\00"
@.str.20 = private unnamed_addr constant [7 x i8] c"matmul\00"
@.str.21 = private unnamed_addr constant [7 x i8] c"matmul\00"
@.str.22 = private unnamed_addr constant [10 x i8] c"relu_grad\00"
@.str.23 = private unnamed_addr constant [7 x i8] c"sum_to\00"
@.str.24 = private unnamed_addr constant [7 x i8] c"matmul\00"
@kernel_sites = internal constant [13 x %trc_kernel_site] [%trc_kernel_site { ptr @.str.9, ptr null, i32 5, [2 x [3 x double]] [[3 x double] [double 0x3E93DED226EE8181, double 0.000000e+00, double 0.000000e+00], [3 x double] [double 0x3E93F08E1230BA1D, double 0.000000e+00, double 0.000000e+00]] }, %trc_kernel_site { ptr @.str.10, ptr @.str.11, i32 5, [2 x [3 x double]] [[3 x double] [double 0x3E93A5D946BC28D2, double 0.000000e+00, double 0.000000e+00], [3 x double] [double 0x3E93A5D946BC28D2, double 0.000000e+00, double 0.000000e+00]] }, %trc_kernel_site { ptr @.str.12, ptr null, i32 6, [2 x [3 x double]] [[3 x double] [double 0x3E93B3924F10ED01, double 0.000000e+00, double 0.000000e+00], [3 x double] [double 0x3E93C54E3A53259C, double 0.000000e+00, double 0.000000e+00]] }, %trc_kernel_site { ptr @.str.13, ptr @.str.14, i32 6, [2 x [3 x double]] [[3 x double] [double 0x3E93946A911C2729, double 0.000000e+00, double 0.000000e+00], [3 x double] [double 0x3E93946A911C2729, double 0.000000e+00, double 0.000000e+00]] }, %trc_kernel_site { ptr @.str.15, ptr null, i32 7, [2 x [3 x double]] [[3 x double] [double 0x3E93B8F93FEA706E, double 0.000000e+00, double 0.000000e+00], [3 x double] [double 0x3E93B8F93FEA706E, double 0.000000e+00, double 0.000000e+00]] }, %trc_kernel_site { ptr @.str.16, ptr @.str.17, i32 7, [2 x [3 x double]] [[3 x double] [double 0x3E93933B84FF75E3, double 0.000000e+00, double 0.000000e+00], [3 x double] [double 0x3E93933B84FF75E3, double 0.000000e+00, double 0.000000e+00]] }, %trc_kernel_site { ptr @.str.18, ptr null, i32 7, [2 x [3 x double]] [[3 x double] [double 0.000000e+00, double 0x3E93A627C2410C72, double 0.000000e+00], [3 x double] [double 0.000000e+00, double 0x3E93A627C2410C72, double 0.000000e+00]] }, %trc_kernel_site { ptr @.str.19, ptr null, i32 6, [2 x [3 x double]] [[3 x double] [double 0.000000e+00, double 0x3E938CE24268D79C, double 0.000000e+00], [3 x double] [double 0.000000e+00, double 0x3E938CE24268D79C, double 0.000000e+00]] }, %trc_kernel_site { ptr @.str.20, ptr null, i32 6, [2 x [3 x double]] [[3 x double] [double 0.000000e+00, double 0x3E939DE103DDA331, double 0.000000e+00], [3 x double] [double 0.000000e+00, double 0x3E93AF9CEF1FDBCC, double 0.000000e+00]] }, %trc_kernel_site { ptr @.str.21, ptr null, i32 6, [2 x [3 x double]] [[3 x double] [double 0.000000e+00, double 0x3E939DE103DDA331, double 0.000000e+00], [3 x double] [double 0.000000e+00, double 0x3E93C158DA621467, double 0.000000e+00]] }, %trc_kernel_site { ptr @.str.22, ptr null, i32 5, [2 x [3 x double]] [[3 x double] [double 0.000000e+00, double 0x3E93A660649808FB, double 0.000000e+00], [3 x double] [double 0.000000e+00, double 0x3E93A660649808FB, double 0.000000e+00]] }, %trc_kernel_site { ptr @.str.23, ptr null, i32 5, [2 x [3 x double]] [[3 x double] [double 0.000000e+00, double 0x3E939445E46F19DC, double 0.000000e+00], [3 x double] [double 0.000000e+00, double 0x3E939445E46F19DC, double 0.000000e+00]] }, %trc_kernel_site { ptr @.str.24, ptr null, i32 5, [2 x [3 x double]] [[3 x double] [double 0.000000e+00, double 0x3E93A601CFB15278, double 0.000000e+00], [3 x double] [double 0.000000e+00, double 0x3E93C979A635C3AF, double 0.000000e+00]] }]
@model = internal constant %trc_model { ptr @.str, ptr @.str.1, i64 4, i64 1664, i64 128, i64 0, i64 0, i64 112, i64 448, i64 112, ptr null, ptr null, i32 4, ptr @params, i32 2, ptr @inputs, i64 1600, i64 1088, i32 0, i32 1, i64 1536, i64 3, i64 1, i32 0, i64 0, i64 0, i64 0, i32 0, i32 1, i32 -1, i32 0, i32 0, i64 0, i64 1096, i64 1104, ptr @forward, ptr @backward, ptr @step, ptr @.str.8, i32 13, ptr @kernel_sites, [2 x double] [double 0x3E54B09277ECB558, double 0x3E55FB9B9F6B80AE], i32 0, %trc_train_config { i64 1, i64 1, i64 0, i32 1, double 1.000000e-03, double 0.000000e+00, double 1.000000e-02, double 9.000000e-01, double 0x3FEFF7CED916872B, double 1.000000e-08, i32 0, i32 0, i64 0, double 0.000000e+00, double 0.000000e+00, i64 42, i32 0, i64 0, i32 3, i64 50, double 0.000000e+00, i64 1, i64 0, i32 0, i32 0, i32 0, double 1.000000e+00, double 0.000000e+00, i32 0 }, ptr null }
@llvm.compiler.used = appending global [6 x ptr] [ptr @_ZGVeN16v_expf, ptr @_ZGVdN8v_expf, ptr @_ZGVbN4v_expf, ptr @_ZGVeN16v_logf, ptr @_ZGVdN8v_logf, ptr @_ZGVbN4v_logf], section "llvm.metadata"

define internal float @trc_maxf(float %0, float %1) #0 {
entry:
  %2 = fcmp uno float %1, %1
  %3 = fcmp ogt float %0, %1
  %4 = or i1 %3, %2
  %5 = select i1 %4, float %0, float %1
  ret float %5
}

define internal float @trc_minf(float %0, float %1) #0 {
entry:
  %2 = fcmp uno float %1, %1
  %3 = fcmp olt float %0, %1
  %4 = or i1 %3, %2
  %5 = select i1 %4, float %0, float %1
  ret float %5
}

define internal float @trc_kernel_uniform(ptr %0, i64 %1, i64 %2) #0 {
entry:
  %3 = load i32, ptr %0, align 4
  %4 = zext i32 %3 to i64
  %5 = getelementptr inbounds i32, ptr %0, i64 1
  %6 = load i32, ptr %5, align 4
  %7 = zext i32 %6 to i64
  %8 = shl i64 %7, 32
  %9 = or i64 %4, %8
  %10 = add i64 %1, 1
  %11 = mul i64 -7046029254386353131, %10
  %12 = add i64 %2, 1
  %13 = mul i64 -7046029254386353131, %12
  %14 = add i64 %9, %11
  %15 = lshr i64 %14, 30
  %16 = xor i64 %14, %15
  %17 = mul i64 %16, -4658895280553007687
  %18 = lshr i64 %17, 27
  %19 = xor i64 %17, %18
  %20 = mul i64 %19, -7723592293110705685
  %21 = lshr i64 %20, 31
  %22 = xor i64 %20, %21
  %23 = add i64 %22, %13
  %24 = lshr i64 %23, 30
  %25 = xor i64 %23, %24
  %26 = mul i64 %25, -4658895280553007687
  %27 = lshr i64 %26, 27
  %28 = xor i64 %26, %27
  %29 = mul i64 %28, -7723592293110705685
  %30 = lshr i64 %29, 31
  %31 = xor i64 %29, %30
  %32 = lshr i64 %31, 40
  %33 = uitofp i64 %32 to float
  %34 = fmul float %33, 0x3E70000000000000
  ret float %34
}

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare float @llvm.sqrt.f32(float) #1

; Function Attrs: noinline
define internal void @k3(ptr noalias %0, ptr noalias %1, ptr noalias %2) #2 {
entry:
  call void @trc_gemm(i64 1, i64 1, i32 0, i32 1, i64 4, i64 7, i64 5, ptr %1, i64 5, i64 20, i64 0, ptr %2, i64 5, i64 35, i64 0, float 0.000000e+00, ptr %0, i64 7, i64 28, i64 0)
  ret void
}

declare void @trc_gemm(i64, i64, i32, i32, i64, i64, i64, ptr, i64, i64, i64, ptr, i64, i64, i64, float, ptr, i64, i64, i64)

define internal void @k6_loop0_range(ptr noalias %0, ptr noalias %1, ptr noalias %2, i64 %3, i64 %4) #0 {
entry:
  %t = alloca float, align 4
  %5 = sub nsw i64 %4, %3
  %6 = icmp sgt i64 %5, 0
  br i1 %6, label %loop, label %done3

loop:                                             ; preds = %done, %entry
  %i = phi i64 [ 0, %entry ], [ %22, %done ]
  %7 = add nsw i64 %3, %i
  br label %loop1

loop1:                                            ; preds = %loop1, %loop
  %i2 = phi i64 [ 0, %loop ], [ %20, %loop1 ]
  %8 = mul nsw i64 %7, 7
  %9 = add nsw i64 %i2, %8
  %10 = getelementptr inbounds float, ptr %0, i64 %9
  %11 = load float, ptr %10, align 4
  %12 = getelementptr inbounds float, ptr %1, i64 %i2
  %13 = load float, ptr %12, align 4
  %14 = fadd float %11, %13
  store float %14, ptr %t, align 4
  %15 = mul nsw i64 %7, 7
  %16 = add nsw i64 %15, %i2
  %17 = load float, ptr %t, align 4
  %18 = call float @trc_maxf(float %17, float 0.000000e+00)
  %19 = getelementptr inbounds float, ptr %2, i64 %16
  store float %18, ptr %19, align 4
  %20 = add nsw i64 %i2, 1
  %21 = icmp slt i64 %20, 7
  br i1 %21, label %loop1, label %done

done:                                             ; preds = %loop1
  %22 = add nsw i64 %i, 1
  %23 = icmp slt i64 %22, %5
  br i1 %23, label %loop, label %done3

done3:                                            ; preds = %done, %entry
  ret void
}

define internal void @k6_loop0(ptr %0, i64 %1, i64 %2) #0 {
entry:
  %3 = getelementptr inbounds ptr, ptr %0, i64 0
  %4 = load ptr, ptr %3, align 8
  %5 = getelementptr inbounds ptr, ptr %0, i64 1
  %6 = load ptr, ptr %5, align 8
  %7 = getelementptr inbounds ptr, ptr %0, i64 2
  %8 = load ptr, ptr %7, align 8
  call void @k6_loop0_range(ptr %4, ptr %6, ptr %8, i64 %1, i64 %2)
  ret void
}

; Function Attrs: noinline
define internal void @k6(ptr noalias %0, ptr noalias %1, ptr noalias %2) #2 {
entry:
  %3 = alloca [3 x ptr], align 8
  %t = alloca float, align 4
  %4 = getelementptr inbounds ptr, ptr %3, i64 0
  store ptr %1, ptr %4, align 8
  %5 = getelementptr inbounds ptr, ptr %3, i64 1
  store ptr %2, ptr %5, align 8
  %6 = getelementptr inbounds ptr, ptr %3, i64 2
  store ptr %0, ptr %6, align 8
  call void @k6_loop0(ptr %3, i64 0, i64 4)
  ret void
}

; Function Attrs: noinline
define internal void @k8(ptr noalias %0, ptr noalias %1, ptr noalias %2) #2 {
entry:
  call void @trc_gemm(i64 1, i64 1, i32 0, i32 1, i64 4, i64 3, i64 7, ptr %1, i64 7, i64 28, i64 0, ptr %2, i64 7, i64 21, i64 0, float 0.000000e+00, ptr %0, i64 3, i64 12, i64 0)
  ret void
}

define internal void @k10_loop0_range(ptr noalias %0, ptr noalias %1, ptr noalias %2, i64 %3, i64 %4) #0 {
entry:
  %5 = sub nsw i64 %4, %3
  %6 = icmp sgt i64 %5, 0
  br i1 %6, label %loop, label %done3

loop:                                             ; preds = %done, %entry
  %i = phi i64 [ 0, %entry ], [ %20, %done ]
  %7 = add nsw i64 %3, %i
  br label %loop1

loop1:                                            ; preds = %loop1, %loop
  %i2 = phi i64 [ 0, %loop ], [ %18, %loop1 ]
  %8 = mul nsw i64 %7, 3
  %9 = add nsw i64 %i2, %8
  %10 = mul nsw i64 %7, 3
  %11 = add nsw i64 %i2, %10
  %12 = getelementptr inbounds float, ptr %0, i64 %11
  %13 = load float, ptr %12, align 4
  %14 = getelementptr inbounds float, ptr %1, i64 %i2
  %15 = load float, ptr %14, align 4
  %16 = fadd float %13, %15
  %17 = getelementptr inbounds float, ptr %2, i64 %9
  store float %16, ptr %17, align 4
  %18 = add nsw i64 %i2, 1
  %19 = icmp slt i64 %18, 3
  br i1 %19, label %loop1, label %done

done:                                             ; preds = %loop1
  %20 = add nsw i64 %i, 1
  %21 = icmp slt i64 %20, %5
  br i1 %21, label %loop, label %done3

done3:                                            ; preds = %done, %entry
  ret void
}

define internal void @k10_loop0(ptr %0, i64 %1, i64 %2) #0 {
entry:
  %3 = getelementptr inbounds ptr, ptr %0, i64 0
  %4 = load ptr, ptr %3, align 8
  %5 = getelementptr inbounds ptr, ptr %0, i64 1
  %6 = load ptr, ptr %5, align 8
  %7 = getelementptr inbounds ptr, ptr %0, i64 2
  %8 = load ptr, ptr %7, align 8
  call void @k10_loop0_range(ptr %4, ptr %6, ptr %8, i64 %1, i64 %2)
  ret void
}

; Function Attrs: noinline
define internal void @k10(ptr noalias %0, ptr noalias %1, ptr noalias %2) #2 {
entry:
  %3 = alloca [3 x ptr], align 8
  %4 = getelementptr inbounds ptr, ptr %3, i64 0
  store ptr %1, ptr %4, align 8
  %5 = getelementptr inbounds ptr, ptr %3, i64 1
  store ptr %2, ptr %5, align 8
  %6 = getelementptr inbounds ptr, ptr %3, i64 2
  store ptr %0, ptr %6, align 8
  call void @k10_loop0(ptr %3, i64 0, i64 4)
  ret void
}

define internal void @k11_loop0_range(ptr noalias %0, ptr noalias %1, i64 %2, i64 %3) #0 {
entry:
  %t = alloca float, align 4
  %t1 = alloca float, align 4
  %t2 = alloca float, align 4
  %4 = sub nsw i64 %3, %2
  %5 = icmp sgt i64 %4, 0
  br i1 %5, label %loop, label %done8

loop:                                             ; preds = %done7, %entry
  %i = phi i64 [ 0, %entry ], [ %32, %done7 ]
  %6 = add nsw i64 %2, %i
  store float 0xFFF0000000000000, ptr %t, align 4
  br label %loop3

loop3:                                            ; preds = %loop3, %loop
  %i4 = phi i64 [ 0, %loop ], [ %13, %loop3 ]
  %7 = load float, ptr %t, align 4
  %8 = mul nsw i64 %6, 3
  %9 = add nsw i64 %8, %i4
  %10 = getelementptr inbounds float, ptr %0, i64 %9
  %11 = load float, ptr %10, align 4
  %12 = call float @trc_maxf(float %7, float %11)
  store float %12, ptr %t, align 4
  %13 = add nsw i64 %i4, 1
  %14 = icmp slt i64 %13, 3
  br i1 %14, label %loop3, label %done

done:                                             ; preds = %loop3
  store float 0.000000e+00, ptr %t1, align 4
  br label %loop5

loop5:                                            ; preds = %loop5, %done
  %i6 = phi i64 [ 0, %done ], [ %24, %loop5 ]
  %15 = load float, ptr %t1, align 4
  %16 = mul nsw i64 %6, 3
  %17 = add nsw i64 %16, %i6
  %18 = getelementptr inbounds float, ptr %0, i64 %17
  %19 = load float, ptr %18, align 4
  %20 = load float, ptr %t, align 4
  %21 = fsub float %19, %20
  %22 = call float @expf(float %21) #4
  %23 = fadd float %15, %22
  store float %23, ptr %t1, align 4
  %24 = add nsw i64 %i6, 1
  %25 = icmp slt i64 %24, 3
  br i1 %25, label %loop5, label %done7

done7:                                            ; preds = %loop5
  %26 = load float, ptr %t, align 4
  %27 = load float, ptr %t1, align 4
  %28 = call float @logf(float %27) #5
  %29 = fadd float %26, %28
  store float %29, ptr %t2, align 4
  %30 = load float, ptr %t2, align 4
  %31 = getelementptr inbounds float, ptr %1, i64 %6
  store float %30, ptr %31, align 4
  %32 = add nsw i64 %i, 1
  %33 = icmp slt i64 %32, %4
  br i1 %33, label %loop, label %done8

done8:                                            ; preds = %done7, %entry
  ret void
}

; Function Attrs: nounwind willreturn memory(none)
declare float @expf(float) #3

; Function Attrs: nounwind willreturn memory(none)
declare <16 x float> @_ZGVeN16v_expf(<16 x float>) #3

; Function Attrs: nounwind willreturn memory(none)
declare <8 x float> @_ZGVdN8v_expf(<8 x float>) #3

; Function Attrs: nounwind willreturn memory(none)
declare <4 x float> @_ZGVbN4v_expf(<4 x float>) #3

; Function Attrs: nounwind willreturn memory(none)
declare float @logf(float) #3

; Function Attrs: nounwind willreturn memory(none)
declare <16 x float> @_ZGVeN16v_logf(<16 x float>) #3

; Function Attrs: nounwind willreturn memory(none)
declare <8 x float> @_ZGVdN8v_logf(<8 x float>) #3

; Function Attrs: nounwind willreturn memory(none)
declare <4 x float> @_ZGVbN4v_logf(<4 x float>) #3

define internal void @k11_loop0(ptr %0, i64 %1, i64 %2) #0 {
entry:
  %3 = getelementptr inbounds ptr, ptr %0, i64 0
  %4 = load ptr, ptr %3, align 8
  %5 = getelementptr inbounds ptr, ptr %0, i64 1
  %6 = load ptr, ptr %5, align 8
  call void @k11_loop0_range(ptr %4, ptr %6, i64 %1, i64 %2)
  ret void
}

; Function Attrs: noinline
define internal void @k11(ptr noalias %0, ptr noalias %1) #2 {
entry:
  %2 = alloca [2 x ptr], align 8
  %t = alloca float, align 4
  %t1 = alloca float, align 4
  %t2 = alloca float, align 4
  %3 = getelementptr inbounds ptr, ptr %2, i64 0
  store ptr %1, ptr %3, align 8
  %4 = getelementptr inbounds ptr, ptr %2, i64 1
  store ptr %0, ptr %4, align 8
  call void @k11_loop0(ptr %2, i64 0, i64 4)
  ret void
}

; Function Attrs: noinline
define internal void @k12(ptr noalias %0, ptr noalias %1, ptr noalias %2, ptr noalias %3) #2 {
entry:
  %t = alloca float, align 4
  store float 0.000000e+00, ptr %t, align 4
  br label %loop

loop:                                             ; preds = %loop, %entry
  %i = phi i64 [ 0, %entry ], [ %16, %loop ]
  %4 = load float, ptr %t, align 4
  %5 = getelementptr inbounds float, ptr %3, i64 %i
  %6 = load float, ptr %5, align 4
  %7 = mul nsw i64 %i, 3
  %8 = getelementptr inbounds i32, ptr %2, i64 %i
  %9 = load i32, ptr %8, align 4
  %10 = sext i32 %9 to i64
  %11 = add nsw i64 %7, %10
  %12 = getelementptr inbounds float, ptr %1, i64 %11
  %13 = load float, ptr %12, align 4
  %14 = fsub float %6, %13
  %15 = fadd float %4, %14
  store float %15, ptr %t, align 4
  %16 = add nsw i64 %i, 1
  %17 = icmp slt i64 %16, 4
  br i1 %17, label %loop, label %done

done:                                             ; preds = %loop
  %18 = load float, ptr %t, align 4
  %19 = fmul float %18, 2.500000e-01
  %20 = getelementptr inbounds float, ptr %0, i64 0
  store float %19, ptr %20, align 4
  ret void
}

define internal void @k14_loop0_range(ptr noalias %0, ptr noalias %1, ptr noalias %2, ptr noalias %3, ptr noalias %4, i64 %5, i64 %6) #0 {
entry:
  %t = alloca float, align 4
  %t1 = alloca float, align 4
  %t2 = alloca float, align 4
  %7 = sub nsw i64 %6, %5
  %8 = icmp sgt i64 %7, 0
  br i1 %8, label %loop, label %done5

loop:                                             ; preds = %done, %entry
  %i = phi i64 [ 0, %entry ], [ %40, %done ]
  %9 = add nsw i64 %5, %i
  %10 = getelementptr inbounds float, ptr %2, i64 %9
  %11 = load float, ptr %10, align 4
  store float %11, ptr %t, align 4
  %12 = getelementptr inbounds float, ptr %3, i64 0
  %13 = load float, ptr %12, align 4
  %14 = fmul float %13, 2.500000e-01
  store float %14, ptr %t1, align 4
  %15 = getelementptr inbounds i32, ptr %0, i64 %9
  %16 = load i32, ptr %15, align 4
  %17 = sext i32 %16 to i64
  %18 = trunc i64 %17 to i32
  %19 = sitofp i32 %18 to float
  store float %19, ptr %t2, align 4
  br label %loop3

loop3:                                            ; preds = %loop3, %loop
  %i4 = phi i64 [ 0, %loop ], [ %38, %loop3 ]
  %20 = mul nsw i64 %9, 3
  %21 = add nsw i64 %20, %i4
  %22 = mul nsw i64 %9, 3
  %23 = add nsw i64 %22, %i4
  %24 = getelementptr inbounds float, ptr %1, i64 %23
  %25 = load float, ptr %24, align 4
  %26 = load float, ptr %t, align 4
  %27 = fsub float %25, %26
  %28 = call float @expf(float %27) #4
  %29 = trunc i64 %i4 to i32
  %30 = sitofp i32 %29 to float
  %31 = load float, ptr %t2, align 4
  %32 = fcmp oeq float %30, %31
  %33 = select i1 %32, float 1.000000e+00, float 0.000000e+00
  %34 = fsub float %28, %33
  %35 = load float, ptr %t1, align 4
  %36 = fmul float %34, %35
  %37 = getelementptr inbounds float, ptr %4, i64 %21
  store float %36, ptr %37, align 4
  %38 = add nsw i64 %i4, 1
  %39 = icmp slt i64 %38, 3
  br i1 %39, label %loop3, label %done

done:                                             ; preds = %loop3
  %40 = add nsw i64 %i, 1
  %41 = icmp slt i64 %40, %7
  br i1 %41, label %loop, label %done5

done5:                                            ; preds = %done, %entry
  ret void
}

define internal void @k14_loop0(ptr %0, i64 %1, i64 %2) #0 {
entry:
  %3 = getelementptr inbounds ptr, ptr %0, i64 0
  %4 = load ptr, ptr %3, align 8
  %5 = getelementptr inbounds ptr, ptr %0, i64 1
  %6 = load ptr, ptr %5, align 8
  %7 = getelementptr inbounds ptr, ptr %0, i64 2
  %8 = load ptr, ptr %7, align 8
  %9 = getelementptr inbounds ptr, ptr %0, i64 3
  %10 = load ptr, ptr %9, align 8
  %11 = getelementptr inbounds ptr, ptr %0, i64 4
  %12 = load ptr, ptr %11, align 8
  call void @k14_loop0_range(ptr %4, ptr %6, ptr %8, ptr %10, ptr %12, i64 %1, i64 %2)
  ret void
}

; Function Attrs: noinline
define internal void @k14(ptr noalias %0, ptr noalias %1, ptr noalias %2, ptr noalias %3, ptr noalias %4) #2 {
entry:
  %5 = alloca [5 x ptr], align 8
  %t = alloca float, align 4
  %t1 = alloca float, align 4
  %t2 = alloca float, align 4
  %6 = getelementptr inbounds ptr, ptr %5, i64 0
  store ptr %2, ptr %6, align 8
  %7 = getelementptr inbounds ptr, ptr %5, i64 1
  store ptr %1, ptr %7, align 8
  %8 = getelementptr inbounds ptr, ptr %5, i64 2
  store ptr %3, ptr %8, align 8
  %9 = getelementptr inbounds ptr, ptr %5, i64 3
  store ptr %4, ptr %9, align 8
  %10 = getelementptr inbounds ptr, ptr %5, i64 4
  store ptr %0, ptr %10, align 8
  call void @k14_loop0(ptr %5, i64 0, i64 4)
  ret void
}

; Function Attrs: noinline
define internal void @k15(ptr noalias %0, ptr noalias %1) #2 {
entry:
  br label %loop

loop:                                             ; preds = %done, %entry
  %i = phi i64 [ 0, %entry ], [ %12, %done ]
  br label %loop1

loop1:                                            ; preds = %loop1, %loop
  %i2 = phi i64 [ 0, %loop ], [ %10, %loop1 ]
  %2 = mul nsw i64 %i, 3
  %3 = add nsw i64 %i2, %2
  %4 = getelementptr inbounds float, ptr %1, i64 %3
  %5 = load float, ptr %4, align 4
  %6 = getelementptr inbounds float, ptr %0, i64 %i2
  %7 = load float, ptr %6, align 4
  %8 = fadd float %7, %5
  %9 = getelementptr inbounds float, ptr %0, i64 %i2
  store float %8, ptr %9, align 4
  %10 = add nsw i64 %i2, 1
  %11 = icmp slt i64 %10, 3
  br i1 %11, label %loop1, label %done

done:                                             ; preds = %loop1
  %12 = add nsw i64 %i, 1
  %13 = icmp slt i64 %12, 4
  br i1 %13, label %loop, label %done3

done3:                                            ; preds = %done
  ret void
}

; Function Attrs: noinline
define internal void @k16(ptr noalias %0, ptr noalias %1, ptr noalias %2) #2 {
entry:
  call void @trc_gemm(i64 1, i64 1, i32 0, i32 0, i64 4, i64 7, i64 3, ptr %1, i64 3, i64 12, i64 0, ptr %2, i64 7, i64 21, i64 0, float 0.000000e+00, ptr %0, i64 7, i64 28, i64 0)
  ret void
}

; Function Attrs: noinline
define internal void @k17(ptr noalias %0, ptr noalias %1, ptr noalias %2) #2 {
entry:
  call void @trc_gemm(i64 1, i64 1, i32 1, i32 0, i64 3, i64 7, i64 4, ptr %1, i64 3, i64 12, i64 0, ptr %2, i64 7, i64 28, i64 0, float 1.000000e+00, ptr %0, i64 7, i64 21, i64 0)
  ret void
}

define internal void @k18_loop0_range(ptr noalias %0, ptr noalias %1, ptr noalias %2, i64 %3, i64 %4) #0 {
entry:
  %5 = sub nsw i64 %4, %3
  %6 = icmp sgt i64 %5, 0
  br i1 %6, label %loop, label %done

loop:                                             ; preds = %loop, %entry
  %i = phi i64 [ 0, %entry ], [ %15, %loop ]
  %7 = add nsw i64 %3, %i
  %8 = getelementptr inbounds float, ptr %0, i64 %7
  %9 = load float, ptr %8, align 4
  %10 = fcmp ogt float %9, 0.000000e+00
  %11 = getelementptr inbounds float, ptr %1, i64 %7
  %12 = load float, ptr %11, align 4
  %13 = select i1 %10, float %12, float 0.000000e+00
  %14 = getelementptr inbounds float, ptr %2, i64 %7
  store float %13, ptr %14, align 4
  %15 = add nsw i64 %i, 1
  %16 = icmp slt i64 %15, %5
  br i1 %16, label %loop, label %done

done:                                             ; preds = %loop, %entry
  ret void
}

define internal void @k18_loop0(ptr %0, i64 %1, i64 %2) #0 {
entry:
  %3 = getelementptr inbounds ptr, ptr %0, i64 0
  %4 = load ptr, ptr %3, align 8
  %5 = getelementptr inbounds ptr, ptr %0, i64 1
  %6 = load ptr, ptr %5, align 8
  %7 = getelementptr inbounds ptr, ptr %0, i64 2
  %8 = load ptr, ptr %7, align 8
  call void @k18_loop0_range(ptr %4, ptr %6, ptr %8, i64 %1, i64 %2)
  ret void
}

; Function Attrs: noinline
define internal void @k18(ptr noalias %0, ptr noalias %1, ptr noalias %2) #2 {
entry:
  %3 = alloca [3 x ptr], align 8
  %4 = getelementptr inbounds ptr, ptr %3, i64 0
  store ptr %1, ptr %4, align 8
  %5 = getelementptr inbounds ptr, ptr %3, i64 1
  store ptr %2, ptr %5, align 8
  %6 = getelementptr inbounds ptr, ptr %3, i64 2
  store ptr %0, ptr %6, align 8
  call void @k18_loop0(ptr %3, i64 0, i64 28)
  ret void
}

; Function Attrs: noinline
define internal void @k19(ptr noalias %0, ptr noalias %1) #2 {
entry:
  br label %loop

loop:                                             ; preds = %done, %entry
  %i = phi i64 [ 0, %entry ], [ %12, %done ]
  br label %loop1

loop1:                                            ; preds = %loop1, %loop
  %i2 = phi i64 [ 0, %loop ], [ %10, %loop1 ]
  %2 = mul nsw i64 %i, 7
  %3 = add nsw i64 %i2, %2
  %4 = getelementptr inbounds float, ptr %1, i64 %3
  %5 = load float, ptr %4, align 4
  %6 = getelementptr inbounds float, ptr %0, i64 %i2
  %7 = load float, ptr %6, align 4
  %8 = fadd float %7, %5
  %9 = getelementptr inbounds float, ptr %0, i64 %i2
  store float %8, ptr %9, align 4
  %10 = add nsw i64 %i2, 1
  %11 = icmp slt i64 %10, 7
  br i1 %11, label %loop1, label %done

done:                                             ; preds = %loop1
  %12 = add nsw i64 %i, 1
  %13 = icmp slt i64 %12, 4
  br i1 %13, label %loop, label %done3

done3:                                            ; preds = %done
  ret void
}

; Function Attrs: noinline
define internal void @k20(ptr noalias %0, ptr noalias %1, ptr noalias %2) #2 {
entry:
  call void @trc_gemm(i64 1, i64 1, i32 1, i32 0, i64 7, i64 5, i64 4, ptr %1, i64 7, i64 28, i64 0, ptr %2, i64 5, i64 20, i64 0, float 1.000000e+00, ptr %0, i64 5, i64 35, i64 0)
  ret void
}

define internal void @forward(ptr %0) #0 {
entry:
  call void @trc_kernel_start()
  %1 = getelementptr inbounds i8, ptr %0, i64 1152
  %2 = getelementptr inbounds i8, ptr %0, i64 896
  %3 = getelementptr inbounds i8, ptr %0, i64 0
  call void @k3(ptr %1, ptr %2, ptr %3)
  call void @trc_kernel_done(i32 0)
  %4 = getelementptr inbounds i8, ptr %0, i64 1280
  %5 = getelementptr inbounds i8, ptr %0, i64 1152
  %6 = getelementptr inbounds i8, ptr %0, i64 192
  call void @k6(ptr %4, ptr %5, ptr %6)
  call void @trc_kernel_done(i32 1)
  %7 = getelementptr inbounds i8, ptr %0, i64 1152
  %8 = getelementptr inbounds i8, ptr %0, i64 1280
  %9 = getelementptr inbounds i8, ptr %0, i64 256
  call void @k8(ptr %7, ptr %8, ptr %9)
  call void @trc_kernel_done(i32 2)
  %10 = getelementptr inbounds i8, ptr %0, i64 1536
  %11 = getelementptr inbounds i8, ptr %0, i64 1152
  %12 = getelementptr inbounds i8, ptr %0, i64 384
  call void @k10(ptr %10, ptr %11, ptr %12)
  call void @trc_kernel_done(i32 3)
  %13 = getelementptr inbounds i8, ptr %0, i64 1152
  %14 = getelementptr inbounds i8, ptr %0, i64 1536
  call void @k11(ptr %13, ptr %14)
  call void @trc_kernel_done(i32 4)
  %15 = getelementptr inbounds i8, ptr %0, i64 1600
  %16 = getelementptr inbounds i8, ptr %0, i64 1536
  %17 = getelementptr inbounds i8, ptr %0, i64 1024
  %18 = getelementptr inbounds i8, ptr %0, i64 1152
  call void @k12(ptr %15, ptr %16, ptr %17, ptr %18)
  call void @trc_kernel_done(i32 5)
  ret void
}

declare void @trc_kernel_start()

declare void @trc_kernel_done(i32)

define internal void @backward(ptr %0, ptr %1) #0 {
entry:
  call void @trc_kernel_start()
  %2 = getelementptr inbounds i8, ptr %0, i64 1408
  %3 = getelementptr inbounds i8, ptr %0, i64 1536
  %4 = getelementptr inbounds i8, ptr %0, i64 1024
  %5 = getelementptr inbounds i8, ptr %0, i64 1152
  %6 = getelementptr inbounds i8, ptr %0, i64 1088
  call void @k14(ptr %2, ptr %3, ptr %4, ptr %5, ptr %6)
  call void @trc_kernel_done(i32 6)
  %7 = getelementptr inbounds i8, ptr %0, i64 832
  %8 = getelementptr inbounds i8, ptr %0, i64 1408
  call void @k15(ptr %7, ptr %8)
  call void @trc_kernel_done(i32 7)
  %9 = getelementptr inbounds i8, ptr %0, i64 1152
  %10 = getelementptr inbounds i8, ptr %0, i64 1408
  %11 = getelementptr inbounds i8, ptr %0, i64 256
  call void @k16(ptr %9, ptr %10, ptr %11)
  call void @trc_kernel_done(i32 8)
  %12 = getelementptr inbounds i8, ptr %0, i64 704
  %13 = getelementptr inbounds i8, ptr %0, i64 1408
  %14 = getelementptr inbounds i8, ptr %0, i64 1280
  call void @k17(ptr %12, ptr %13, ptr %14)
  call void @trc_kernel_done(i32 9)
  %15 = icmp ne ptr %1, null
  br i1 %15, label %bucket_ready, label %16

bucket_ready:                                     ; preds = %entry
  call void @trc_step_bucket_ready(ptr %1, i64 64, i64 48)
  br label %16

16:                                               ; preds = %bucket_ready, %entry
  %17 = getelementptr inbounds i8, ptr %0, i64 1408
  %18 = getelementptr inbounds i8, ptr %0, i64 1280
  %19 = getelementptr inbounds i8, ptr %0, i64 1152
  call void @k18(ptr %17, ptr %18, ptr %19)
  call void @trc_kernel_done(i32 10)
  %20 = getelementptr inbounds i8, ptr %0, i64 640
  %21 = getelementptr inbounds i8, ptr %0, i64 1408
  call void @k19(ptr %20, ptr %21)
  call void @trc_kernel_done(i32 11)
  %22 = getelementptr inbounds i8, ptr %0, i64 448
  %23 = getelementptr inbounds i8, ptr %0, i64 1408
  %24 = getelementptr inbounds i8, ptr %0, i64 896
  call void @k20(ptr %22, ptr %23, ptr %24)
  call void @trc_kernel_done(i32 12)
  %25 = icmp ne ptr %1, null
  br i1 %25, label %bucket_ready1, label %26

bucket_ready1:                                    ; preds = %16
  call void @trc_step_bucket_ready(ptr %1, i64 0, i64 64)
  br label %26

26:                                               ; preds = %bucket_ready1, %16
  ret void
}

declare void @trc_step_bucket_ready(ptr, i64, i64)

define internal double @step(ptr %0) #0 {
entry:
  %loss_sum = alloca double, align 8
  store double 0.000000e+00, ptr %loss_sum, align 8
  %1 = call ptr @trc_step_arena(ptr %0)
  %loss_seed = getelementptr inbounds i8, ptr %1, i64 1088
  %loss = getelementptr inbounds i8, ptr %1, i64 1600
  %2 = call i64 @trc_step_micro_batches(ptr %0)
  %3 = call i32 @trc_step_averages_gradients(ptr %0)
  %4 = icmp ne i32 %3, 0
  %5 = call i32 @trc_step_overlaps(ptr %0)
  %6 = icmp ne i32 %5, 0
  %overlap = and i1 %4, %6
  %7 = call float @trc_step_loss_seed(ptr %0)
  call void @trc_step_zero_gradients(ptr %0)
  %8 = icmp sgt i64 %2, 0
  br i1 %8, label %loop, label %done

loop:                                             ; preds = %loop, %entry
  %i = phi i64 [ 0, %entry ], [ %17, %loop ]
  call void @trc_step_micro_batch(ptr %0, i64 %i)
  store float %7, ptr %loss_seed, align 4
  call void @forward(ptr %1)
  %9 = load float, ptr %loss, align 4
  %10 = fpext float %9 to double
  %11 = load double, ptr %loss_sum, align 8
  %12 = fadd double %11, %10
  store double %12, ptr %loss_sum, align 8
  %13 = sub i64 %2, 1
  %14 = icmp eq i64 %i, %13
  %15 = and i1 %14, %overlap
  %16 = select i1 %15, ptr %0, ptr null
  call void @backward(ptr %1, ptr %16)
  %17 = add nsw i64 %i, 1
  %18 = icmp slt i64 %17, %2
  br i1 %18, label %loop, label %done

done:                                             ; preds = %loop, %entry
  br i1 %overlap, label %wait_gradients, label %19

wait_gradients:                                   ; preds = %done
  call void @trc_step_wait_gradients(ptr %0)
  br label %19

19:                                               ; preds = %wait_gradients, %done
  %20 = xor i1 %overlap, true
  %21 = and i1 %4, %20
  br i1 %21, label %allreduce_gradients, label %22

allreduce_gradients:                              ; preds = %19
  call void @trc_step_allreduce_gradients(ptr %0)
  br label %22

22:                                               ; preds = %allreduce_gradients, %19
  %23 = sitofp i64 %2 to double
  %24 = load double, ptr %loss_sum, align 8
  %mean = fdiv double %24, %23
  %25 = call double @llvm.fabs.f64(double %mean)
  %26 = fcmp one double %25, 0x7FF0000000000000
  br i1 %26, label %update, label %not_finite

update:                                           ; preds = %22
  call void @trc_step_clip_gradients(ptr %0)
  call void @trc_step_update(ptr %0)
  %27 = call i32 @trc_step_ends_round(ptr %0)
  %28 = icmp ne i32 %27, 0
  br i1 %28, label %average_parameters, label %29

not_finite:                                       ; preds = %22
  ret double %mean

average_parameters:                               ; preds = %update
  call void @trc_step_average_parameters(ptr %0)
  br label %29

29:                                               ; preds = %average_parameters, %update
  ret double %mean
}

declare ptr @trc_step_arena(ptr)

declare i64 @trc_step_micro_batches(ptr)

declare i32 @trc_step_averages_gradients(ptr)

declare i32 @trc_step_overlaps(ptr)

declare float @trc_step_loss_seed(ptr)

declare void @trc_step_zero_gradients(ptr)

declare void @trc_step_micro_batch(ptr, i64)

declare void @trc_step_wait_gradients(ptr)

declare void @trc_step_allreduce_gradients(ptr)

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare double @llvm.fabs.f64(double) #1

declare void @trc_step_clip_gradients(ptr)

declare void @trc_step_update(ptr)

declare i32 @trc_step_ends_round(ptr)

declare void @trc_step_average_parameters(ptr)

define i32 @main(i32 %0, ptr %1) #0 {
entry:
  %2 = call i32 @trc_main(ptr @model, i32 %0, ptr %1)
  ret i32 %2
}

declare i32 @trc_main(ptr, i32, ptr)

attributes #0 = { "prefer-vector-width"="512" }
attributes #1 = { nocallback nofree nosync nounwind speculatable willreturn memory(none) }
attributes #2 = { noinline "prefer-vector-width"="512" }
attributes #3 = { nounwind willreturn memory(none) }
attributes #4 = { nobuiltin "vector-function-abi-variant"="_ZGVeN16v_expf(_ZGVeN16v_expf),_ZGVdN8v_expf(_ZGVdN8v_expf),_ZGVbN4v_expf(_ZGVbN4v_expf)" }
attributes #5 = { nobuiltin "vector-function-abi-variant"="_ZGVeN16v_logf(_ZGVeN16v_logf),_ZGVdN8v_logf(_ZGVdN8v_logf),_ZGVbN4v_logf(_ZGVbN4v_logf)" }
[exit 0]
