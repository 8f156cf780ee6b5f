; ModuleID = 'm'
source_filename = "tests/e2e/gradcheck/linear_relu.nn"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

%trc_param = type { ptr, i32, [8 x i64], i64, i64, i32, float, float, i64, i64, i32 }
%trc_input = type { ptr, i32, i32, [8 x i64], i64, i64, i64 }
%trc_model = type { ptr, ptr, i64, i64, i64, i64, i64, i32, ptr, i32, ptr, i64, i64, i32, i32, i64, i64, i64, i32, i32, i32, i32, i64, i64, i64, ptr, ptr, ptr, ptr, %trc_train_config, ptr }
%trc_train_config = type { i64, i64, i64, i32, double, double, double, double, double, double, i32, i32, i64, double, double, i64, i32, i64, i32, i64, double, i64, i64, i32, i32, i32, double, double, i32 }

@.str = private unnamed_addr constant [2 x i8] c"m\00"
@.str.1 = private unnamed_addr constant [35 x i8] c"tests/e2e/gradcheck/linear_relu.nn\00"
@.str.2 = private unnamed_addr constant [9 x i8] c"h.weight\00"
@.str.3 = private unnamed_addr constant [7 x i8] c"h.bias\00"
@.str.4 = private unnamed_addr constant [14 x i8] c"logits.weight\00"
@.str.5 = private unnamed_addr constant [12 x i8] c"logits.bias\00"
@params = internal constant [4 x %trc_param] [%trc_param { ptr @.str.2, i32 2, [8 x i64] [i64 7, i64 5, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0], i64 0, i64 35, i32 3, float 0xBFDC9F25C0000000, float 0x3FDC9F25C0000000, i64 5, i64 7, i32 1 }, %trc_param { ptr @.str.3, i32 1, [8 x i64] [i64 7, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0], i64 192, i64 7, i32 3, float 0xBFDC9F25C0000000, float 0x3FDC9F25C0000000, i64 5, i64 7, i32 0 }, %trc_param { ptr @.str.4, i32 2, [8 x i64] [i64 3, i64 7, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0], i64 256, i64 21, i32 3, float 0xBFD83091E0000000, float 0x3FD83091E0000000, i64 7, i64 3, i32 1 }, %trc_param { ptr @.str.5, i32 1, [8 x i64] [i64 3, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0], i64 384, i64 3, i32 3, float 0xBFD83091E0000000, float 0x3FD83091E0000000, i64 7, i64 3, i32 0 }]
@.str.6 = private unnamed_addr constant [2 x i8] c"x\00"
@.str.7 = private unnamed_addr constant [6 x i8] c"label\00"
@inputs = internal constant [2 x %trc_input] [%trc_input { ptr @.str.6, i32 0, i32 2, [8 x i64] [i64 4, i64 5, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0], i64 896, i64 20, i64 0 }, %trc_input { ptr @.str.7, i32 1, i32 1, [8 x i64] [i64 4, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0, i64 0], i64 1024, i64 4, i64 3 }]
@.str.8 = private unnamed_addr constant [4 x i8] c"off\00"
@model = internal constant %trc_model { ptr @.str, ptr @.str.1, i64 4, i64 1728, i64 0, i64 112, i64 448, i32 4, ptr @params, i32 2, ptr @inputs, i64 1152, i64 1088, i32 0, i32 1, i64 1216, i64 3, i64 1, i32 1, i32 -1, i32 0, i32 0, i64 0, i64 1096, i64 1104, ptr @forward, ptr @backward, ptr @step, ptr @.str.8, %trc_train_config { i64 1, i64 1, i64 0, i32 1, double 1.000000e-03, double 0.000000e+00, double 1.000000e-02, double 9.000000e-01, double 0x3FEFF7CED916872B, double 1.000000e-08, i32 0, i32 0, i64 0, double 0.000000e+00, double 0.000000e+00, i64 42, i32 0, i64 0, i32 3, i64 50, double 0.000000e+00, i64 1, i64 0, i32 0, i32 0, i32 0, double 1.000000e+00, double 0.000000e+00, i32 0 }, ptr null }

define internal float @trc_maxf(float %0, float %1) {
entry:
  %2 = fcmp uno float %1, %1
  %3 = fcmp ogt float %0, %1
  %4 = or i1 %3, %2
  %5 = select i1 %4, float %0, float %1
  ret float %5
}

define internal float @trc_minf(float %0, float %1) {
entry:
  %2 = fcmp uno float %1, %1
  %3 = fcmp olt float %0, %1
  %4 = or i1 %3, %2
  %5 = select i1 %4, float %0, float %1
  ret float %5
}

define internal float @trc_kernel_uniform(ptr %0, i64 %1, i64 %2) {
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
declare float @llvm.sqrt.f32(float) #0

; Function Attrs: noinline
define internal void @k3(ptr noalias %0, ptr noalias %1, ptr noalias %2) #1 {
entry:
  br label %loop

loop:                                             ; preds = %loop, %entry
  %i = phi i64 [ 0, %entry ], [ %9, %loop ]
  %3 = mul i64 %i, 20
  %4 = getelementptr inbounds float, ptr %0, i64 %3
  %5 = mul i64 %i, 35
  %6 = getelementptr inbounds float, ptr %1, i64 %5
  %7 = mul i64 %i, 28
  %8 = getelementptr inbounds float, ptr %2, i64 %7
  call void @cblas_sgemm(i32 101, i32 111, i32 112, i32 4, i32 7, i32 5, float 1.000000e+00, ptr %4, i32 5, ptr %6, i32 5, float 0.000000e+00, ptr %8, i32 7)
  %9 = add nsw i64 %i, 1
  %10 = icmp slt i64 %9, 1
  br i1 %10, label %loop, label %done

done:                                             ; preds = %loop
  ret void
}

declare void @cblas_sgemm(i32, i32, i32, i32, i32, i32, float, ptr, i32, ptr, i32, float, ptr, i32)

; Function Attrs: noinline
define internal void @k6(ptr noalias %0, ptr noalias %1, ptr noalias %2) #1 {
entry:
  %t = alloca float, align 4
  br label %loop

loop:                                             ; preds = %done, %entry
  %i = phi i64 [ 0, %entry ], [ %17, %done ]
  br label %loop1

loop1:                                            ; preds = %loop1, %loop
  %i2 = phi i64 [ 0, %loop ], [ %15, %loop1 ]
  %3 = mul nsw i64 %i, 7
  %4 = add nsw i64 %i2, %3
  %5 = getelementptr inbounds float, ptr %0, i64 %4
  %6 = load float, ptr %5, align 4
  %7 = getelementptr inbounds float, ptr %1, i64 %i2
  %8 = load float, ptr %7, align 4
  %9 = fadd float %6, %8
  store float %9, ptr %t, align 4
  %10 = mul nsw i64 %i, 7
  %11 = add nsw i64 %10, %i2
  %12 = load float, ptr %t, align 4
  %13 = call float @trc_maxf(float %12, float 0.000000e+00)
  %14 = getelementptr inbounds float, ptr %2, i64 %11
  store float %13, ptr %14, align 4
  %15 = add nsw i64 %i2, 1
  %16 = icmp slt i64 %15, 7
  br i1 %16, label %loop1, label %done

done:                                             ; preds = %loop1
  %17 = add nsw i64 %i, 1
  %18 = icmp slt i64 %17, 4
  br i1 %18, label %loop, label %done3

done3:                                            ; preds = %done
  ret void
}

; Function Attrs: noinline
define internal void @k8(ptr noalias %0, ptr noalias %1, ptr noalias %2) #1 {
entry:
  br label %loop

loop:                                             ; preds = %loop, %entry
  %i = phi i64 [ 0, %entry ], [ %9, %loop ]
  %3 = mul i64 %i, 28
  %4 = getelementptr inbounds float, ptr %0, i64 %3
  %5 = mul i64 %i, 21
  %6 = getelementptr inbounds float, ptr %1, i64 %5
  %7 = mul i64 %i, 12
  %8 = getelementptr inbounds float, ptr %2, i64 %7
  call void @cblas_sgemm(i32 101, i32 111, i32 112, i32 4, i32 3, i32 7, float 1.000000e+00, ptr %4, i32 7, ptr %6, i32 7, float 0.000000e+00, ptr %8, i32 3)
  %9 = add nsw i64 %i, 1
  %10 = icmp slt i64 %9, 1
  br i1 %10, label %loop, label %done

done:                                             ; preds = %loop
  ret void
}

; Function Attrs: noinline
define internal void @k10(ptr noalias %0, ptr noalias %1, ptr noalias %2) #1 {
entry:
  br label %loop

loop:                                             ; preds = %done, %entry
  %i = phi i64 [ 0, %entry ], [ %15, %done ]
  br label %loop1

loop1:                                            ; preds = %loop1, %loop
  %i2 = phi i64 [ 0, %loop ], [ %13, %loop1 ]
  %3 = mul nsw i64 %i, 3
  %4 = add nsw i64 %i2, %3
  %5 = mul nsw i64 %i, 3
  %6 = add nsw i64 %i2, %5
  %7 = getelementptr inbounds float, ptr %0, i64 %6
  %8 = load float, ptr %7, align 4
  %9 = getelementptr inbounds float, ptr %1, i64 %i2
  %10 = load float, ptr %9, align 4
  %11 = fadd float %8, %10
  %12 = getelementptr inbounds float, ptr %2, i64 %4
  store float %11, ptr %12, align 4
  %13 = add nsw i64 %i2, 1
  %14 = icmp slt i64 %13, 3
  br i1 %14, label %loop1, label %done

done:                                             ; preds = %loop1
  %15 = add nsw i64 %i, 1
  %16 = icmp slt i64 %15, 4
  br i1 %16, label %loop, label %done3

done3:                                            ; preds = %done
  ret void
}

; Function Attrs: noinline
define internal void @k11(ptr noalias %0, ptr noalias %1, ptr noalias %2) #1 {
entry:
  %t = alloca float, align 4
  %t1 = alloca float, align 4
  %t2 = alloca float, align 4
  %t3 = alloca float, align 4
  store float 0.000000e+00, ptr %t, align 4
  br label %loop

loop:                                             ; preds = %done8, %entry
  %i = phi i64 [ 0, %entry ], [ %37, %done8 ]
  store float 0xFFF0000000000000, ptr %t1, align 4
  br label %loop4

loop4:                                            ; preds = %loop4, %loop
  %i5 = phi i64 [ 0, %loop ], [ %9, %loop4 ]
  %3 = load float, ptr %t1, align 4
  %4 = mul nsw i64 %i, 3
  %5 = add nsw i64 %4, %i5
  %6 = getelementptr inbounds float, ptr %1, i64 %5
  %7 = load float, ptr %6, align 4
  %8 = call float @trc_maxf(float %3, float %7)
  store float %8, ptr %t1, align 4
  %9 = add nsw i64 %i5, 1
  %10 = icmp slt i64 %9, 3
  br i1 %10, label %loop4, label %done

done:                                             ; preds = %loop4
  store float 0.000000e+00, ptr %t2, align 4
  br label %loop6

loop6:                                            ; preds = %loop6, %done
  %i7 = phi i64 [ 0, %done ], [ %20, %loop6 ]
  %11 = load float, ptr %t2, align 4
  %12 = mul nsw i64 %i, 3
  %13 = add nsw i64 %12, %i7
  %14 = getelementptr inbounds float, ptr %1, i64 %13
  %15 = load float, ptr %14, align 4
  %16 = load float, ptr %t1, align 4
  %17 = fsub float %15, %16
  %18 = call float @expf(float %17)
  %19 = fadd float %11, %18
  store float %19, ptr %t2, align 4
  %20 = add nsw i64 %i7, 1
  %21 = icmp slt i64 %20, 3
  br i1 %21, label %loop6, label %done8

done8:                                            ; preds = %loop6
  %22 = load float, ptr %t1, align 4
  %23 = load float, ptr %t2, align 4
  %24 = call float @logf(float %23)
  %25 = fadd float %22, %24
  store float %25, ptr %t3, align 4
  %26 = load float, ptr %t, align 4
  %27 = load float, ptr %t3, align 4
  %28 = mul nsw i64 %i, 3
  %29 = getelementptr inbounds i32, ptr %0, i64 %i
  %30 = load i32, ptr %29, align 4
  %31 = sext i32 %30 to i64
  %32 = add nsw i64 %28, %31
  %33 = getelementptr inbounds float, ptr %1, i64 %32
  %34 = load float, ptr %33, align 4
  %35 = fsub float %27, %34
  %36 = fadd float %26, %35
  store float %36, ptr %t, align 4
  %37 = add nsw i64 %i, 1
  %38 = icmp slt i64 %37, 4
  br i1 %38, label %loop, label %done9

done9:                                            ; preds = %done8
  %39 = load float, ptr %t, align 4
  %40 = fmul float %39, 2.500000e-01
  %41 = getelementptr inbounds float, ptr %2, i64 0
  store float %40, ptr %41, align 4
  ret void
}

declare float @expf(float)

declare float @logf(float)

; Function Attrs: noinline
define internal void @k13(ptr noalias %0, ptr noalias %1, ptr noalias %2, ptr noalias %3) #1 {
entry:
  %t = alloca float, align 4
  %t1 = alloca float, align 4
  %t2 = alloca float, align 4
  br label %loop

loop:                                             ; preds = %done10, %entry
  %i = phi i64 [ 0, %entry ], [ %49, %done10 ]
  store float 0xFFF0000000000000, ptr %t, align 4
  br label %loop3

loop3:                                            ; preds = %loop3, %loop
  %i4 = phi i64 [ 0, %loop ], [ %10, %loop3 ]
  %4 = load float, ptr %t, align 4
  %5 = mul nsw i64 %i, 3
  %6 = add nsw i64 %5, %i4
  %7 = getelementptr inbounds float, ptr %1, i64 %6
  %8 = load float, ptr %7, align 4
  %9 = call float @trc_maxf(float %4, float %8)
  store float %9, ptr %t, align 4
  %10 = add nsw i64 %i4, 1
  %11 = icmp slt i64 %10, 3
  br i1 %11, label %loop3, label %done

done:                                             ; preds = %loop3
  store float 0.000000e+00, ptr %t1, align 4
  br label %loop5

loop5:                                            ; preds = %loop5, %done
  %i6 = phi i64 [ 0, %done ], [ %21, %loop5 ]
  %12 = load float, ptr %t1, align 4
  %13 = mul nsw i64 %i, 3
  %14 = add nsw i64 %13, %i6
  %15 = getelementptr inbounds float, ptr %1, i64 %14
  %16 = load float, ptr %15, align 4
  %17 = load float, ptr %t, align 4
  %18 = fsub float %16, %17
  %19 = call float @expf(float %18)
  %20 = fadd float %12, %19
  store float %20, ptr %t1, align 4
  %21 = add nsw i64 %i6, 1
  %22 = icmp slt i64 %21, 3
  br i1 %22, label %loop5, label %done7

done7:                                            ; preds = %loop5
  %23 = load float, ptr %t, align 4
  %24 = load float, ptr %t1, align 4
  %25 = call float @logf(float %24)
  %26 = fadd float %23, %25
  store float %26, ptr %t2, align 4
  br label %loop8

loop8:                                            ; preds = %loop8, %done7
  %i9 = phi i64 [ 0, %done7 ], [ %47, %loop8 ]
  %27 = mul nsw i64 %i, 3
  %28 = add nsw i64 %27, %i9
  %29 = mul nsw i64 %i, 3
  %30 = add nsw i64 %29, %i9
  %31 = getelementptr inbounds float, ptr %1, i64 %30
  %32 = load float, ptr %31, align 4
  %33 = load float, ptr %t2, align 4
  %34 = fsub float %32, %33
  %35 = call float @expf(float %34)
  %36 = getelementptr inbounds i32, ptr %0, i64 %i
  %37 = load i32, ptr %36, align 4
  %38 = sext i32 %37 to i64
  %39 = icmp eq i64 %i9, %38
  %40 = select i1 %39, float 1.000000e+00, float 0.000000e+00
  %41 = fsub float %35, %40
  %42 = getelementptr inbounds float, ptr %2, i64 0
  %43 = load float, ptr %42, align 4
  %44 = fmul float %43, 2.500000e-01
  %45 = fmul float %41, %44
  %46 = getelementptr inbounds float, ptr %3, i64 %28
  store float %45, ptr %46, align 4
  %47 = add nsw i64 %i9, 1
  %48 = icmp slt i64 %47, 3
  br i1 %48, label %loop8, label %done10

done10:                                           ; preds = %loop8
  %49 = add nsw i64 %i, 1
  %50 = icmp slt i64 %49, 4
  br i1 %50, label %loop, label %done11

done11:                                           ; preds = %done10
  ret void
}

; Function Attrs: noinline
define internal void @k14(ptr noalias %0, ptr noalias %1) #1 {
entry:
  br label %loop

loop:                                             ; preds = %done, %entry
  %i = phi i64 [ 0, %entry ], [ %12, %done ]
  br label %loop1

loop1:                                            ; preds = %loop1, %loop
  %i2 = phi i64 [ 0, %loop ], [ %10, %loop1 ]
  %2 = mul nsw i64 %i, 3
  %3 = add nsw i64 %i2, %2
  %4 = getelementptr inbounds float, ptr %0, i64 %3
  %5 = load float, ptr %4, align 4
  %6 = getelementptr inbounds float, ptr %1, i64 %i2
  %7 = load float, ptr %6, align 4
  %8 = fadd float %7, %5
  %9 = getelementptr inbounds float, ptr %1, i64 %i2
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
define internal void @k15(ptr noalias %0, ptr noalias %1, ptr noalias %2) #1 {
entry:
  br label %loop

loop:                                             ; preds = %loop, %entry
  %i = phi i64 [ 0, %entry ], [ %9, %loop ]
  %3 = mul i64 %i, 12
  %4 = getelementptr inbounds float, ptr %0, i64 %3
  %5 = mul i64 %i, 21
  %6 = getelementptr inbounds float, ptr %1, i64 %5
  %7 = mul i64 %i, 28
  %8 = getelementptr inbounds float, ptr %2, i64 %7
  call void @cblas_sgemm(i32 101, i32 111, i32 111, i32 4, i32 7, i32 3, float 1.000000e+00, ptr %4, i32 3, ptr %6, i32 7, float 0.000000e+00, ptr %8, i32 7)
  %9 = add nsw i64 %i, 1
  %10 = icmp slt i64 %9, 1
  br i1 %10, label %loop, label %done

done:                                             ; preds = %loop
  ret void
}

; Function Attrs: noinline
define internal void @k16(ptr noalias %0, ptr noalias %1, ptr noalias %2) #1 {
entry:
  br label %loop

loop:                                             ; preds = %loop, %entry
  %i = phi i64 [ 0, %entry ], [ %9, %loop ]
  %3 = mul i64 %i, 12
  %4 = getelementptr inbounds float, ptr %0, i64 %3
  %5 = mul i64 %i, 28
  %6 = getelementptr inbounds float, ptr %1, i64 %5
  %7 = mul i64 %i, 21
  %8 = getelementptr inbounds float, ptr %2, i64 %7
  call void @cblas_sgemm(i32 101, i32 112, i32 111, i32 3, i32 7, i32 4, float 1.000000e+00, ptr %4, i32 3, ptr %6, i32 7, float 1.000000e+00, ptr %8, i32 7)
  %9 = add nsw i64 %i, 1
  %10 = icmp slt i64 %9, 1
  br i1 %10, label %loop, label %done

done:                                             ; preds = %loop
  ret void
}

; Function Attrs: noinline
define internal void @k17(ptr noalias %0, ptr noalias %1, ptr noalias %2) #1 {
entry:
  br label %loop

loop:                                             ; preds = %loop, %entry
  %i = phi i64 [ 0, %entry ], [ %10, %loop ]
  %3 = getelementptr inbounds float, ptr %0, i64 %i
  %4 = load float, ptr %3, align 4
  %5 = fcmp ogt float %4, 0.000000e+00
  %6 = getelementptr inbounds float, ptr %1, i64 %i
  %7 = load float, ptr %6, align 4
  %8 = select i1 %5, float %7, float 0.000000e+00
  %9 = getelementptr inbounds float, ptr %2, i64 %i
  store float %8, ptr %9, align 4
  %10 = add nsw i64 %i, 1
  %11 = icmp slt i64 %10, 28
  br i1 %11, label %loop, label %done

done:                                             ; preds = %loop
  ret void
}

; Function Attrs: noinline
define internal void @k18(ptr noalias %0, ptr noalias %1) #1 {
entry:
  br label %loop

loop:                                             ; preds = %done, %entry
  %i = phi i64 [ 0, %entry ], [ %12, %done ]
  br label %loop1

loop1:                                            ; preds = %loop1, %loop
  %i2 = phi i64 [ 0, %loop ], [ %10, %loop1 ]
  %2 = mul nsw i64 %i, 7
  %3 = add nsw i64 %i2, %2
  %4 = getelementptr inbounds float, ptr %0, i64 %3
  %5 = load float, ptr %4, align 4
  %6 = getelementptr inbounds float, ptr %1, i64 %i2
  %7 = load float, ptr %6, align 4
  %8 = fadd float %7, %5
  %9 = getelementptr inbounds float, ptr %1, i64 %i2
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
define internal void @k19(ptr noalias %0, ptr noalias %1, ptr noalias %2) #1 {
entry:
  br label %loop

loop:                                             ; preds = %loop, %entry
  %i = phi i64 [ 0, %entry ], [ %9, %loop ]
  %3 = mul i64 %i, 28
  %4 = getelementptr inbounds float, ptr %0, i64 %3
  %5 = mul i64 %i, 20
  %6 = getelementptr inbounds float, ptr %1, i64 %5
  %7 = mul i64 %i, 35
  %8 = getelementptr inbounds float, ptr %2, i64 %7
  call void @cblas_sgemm(i32 101, i32 112, i32 111, i32 7, i32 5, i32 4, float 1.000000e+00, ptr %4, i32 7, ptr %6, i32 5, float 1.000000e+00, ptr %8, i32 5)
  %9 = add nsw i64 %i, 1
  %10 = icmp slt i64 %9, 1
  br i1 %10, label %loop, label %done

done:                                             ; preds = %loop
  ret void
}

define internal void @forward(ptr %0) {
entry:
  %1 = getelementptr inbounds i8, ptr %0, i64 896
  %2 = getelementptr inbounds i8, ptr %0, i64 0
  %3 = getelementptr inbounds i8, ptr %0, i64 1152
  call void @k3(ptr %1, ptr %2, ptr %3)
  %4 = getelementptr inbounds i8, ptr %0, i64 1152
  %5 = getelementptr inbounds i8, ptr %0, i64 192
  %6 = getelementptr inbounds i8, ptr %0, i64 1280
  call void @k6(ptr %4, ptr %5, ptr %6)
  %7 = getelementptr inbounds i8, ptr %0, i64 1280
  %8 = getelementptr inbounds i8, ptr %0, i64 256
  %9 = getelementptr inbounds i8, ptr %0, i64 1152
  call void @k8(ptr %7, ptr %8, ptr %9)
  %10 = getelementptr inbounds i8, ptr %0, i64 1152
  %11 = getelementptr inbounds i8, ptr %0, i64 384
  %12 = getelementptr inbounds i8, ptr %0, i64 1216
  call void @k10(ptr %10, ptr %11, ptr %12)
  %13 = getelementptr inbounds i8, ptr %0, i64 1024
  %14 = getelementptr inbounds i8, ptr %0, i64 1216
  %15 = getelementptr inbounds i8, ptr %0, i64 1152
  call void @k11(ptr %13, ptr %14, ptr %15)
  ret void
}

define internal void @backward(ptr %0, ptr %1) {
entry:
  %2 = getelementptr inbounds i8, ptr %0, i64 1024
  %3 = getelementptr inbounds i8, ptr %0, i64 1216
  %4 = getelementptr inbounds i8, ptr %0, i64 1088
  %5 = getelementptr inbounds i8, ptr %0, i64 1408
  call void @k13(ptr %2, ptr %3, ptr %4, ptr %5)
  %6 = getelementptr inbounds i8, ptr %0, i64 1408
  %7 = getelementptr inbounds i8, ptr %0, i64 832
  call void @k14(ptr %6, ptr %7)
  %8 = getelementptr inbounds i8, ptr %0, i64 1408
  %9 = getelementptr inbounds i8, ptr %0, i64 256
  %10 = getelementptr inbounds i8, ptr %0, i64 1472
  call void @k15(ptr %8, ptr %9, ptr %10)
  %11 = getelementptr inbounds i8, ptr %0, i64 1408
  %12 = getelementptr inbounds i8, ptr %0, i64 1280
  %13 = getelementptr inbounds i8, ptr %0, i64 704
  call void @k16(ptr %11, ptr %12, ptr %13)
  %14 = icmp ne ptr %1, null
  br i1 %14, label %bucket_ready, label %15

bucket_ready:                                     ; preds = %entry
  call void @trc_step_bucket_ready(ptr %1, i64 64, i64 48)
  br label %15

15:                                               ; preds = %bucket_ready, %entry
  %16 = getelementptr inbounds i8, ptr %0, i64 1280
  %17 = getelementptr inbounds i8, ptr %0, i64 1472
  %18 = getelementptr inbounds i8, ptr %0, i64 1600
  call void @k17(ptr %16, ptr %17, ptr %18)
  %19 = getelementptr inbounds i8, ptr %0, i64 1600
  %20 = getelementptr inbounds i8, ptr %0, i64 640
  call void @k18(ptr %19, ptr %20)
  %21 = getelementptr inbounds i8, ptr %0, i64 1600
  %22 = getelementptr inbounds i8, ptr %0, i64 896
  %23 = getelementptr inbounds i8, ptr %0, i64 448
  call void @k19(ptr %21, ptr %22, ptr %23)
  %24 = icmp ne ptr %1, null
  br i1 %24, label %bucket_ready1, label %25

bucket_ready1:                                    ; preds = %15
  call void @trc_step_bucket_ready(ptr %1, i64 0, i64 64)
  br label %25

25:                                               ; preds = %bucket_ready1, %15
  ret void
}

declare void @trc_step_bucket_ready(ptr, i64, i64)

define internal double @step(ptr %0) {
entry:
  %loss_sum = alloca double, align 8
  store double 0.000000e+00, ptr %loss_sum, align 8
  %1 = call ptr @trc_step_arena(ptr %0)
  %2 = call i64 @trc_step_micro_batches(ptr %0)
  %3 = call i32 @trc_step_averages_gradients(ptr %0)
  %4 = icmp ne i32 %3, 0
  %5 = call i32 @trc_step_overlaps(ptr %0)
  %6 = icmp ne i32 %5, 0
  %overlap = and i1 %4, %6
  %7 = call float @trc_step_loss_seed(ptr %0)
  %8 = getelementptr inbounds i8, ptr %1, i64 448
  call void @llvm.memset.p0.i64(ptr align 1 %8, i8 0, i64 448, i1 false)
  %9 = icmp sgt i64 %2, 0
  br i1 %9, label %loop, label %done

loop:                                             ; preds = %loop, %entry
  %i = phi i64 [ 0, %entry ], [ %20, %loop ]
  call void @trc_step_micro_batch(ptr %0, i64 %i)
  %10 = getelementptr inbounds i8, ptr %1, i64 1088
  store float %7, ptr %10, align 4
  call void @forward(ptr %1)
  %11 = getelementptr inbounds i8, ptr %1, i64 1152
  %12 = load float, ptr %11, align 4
  %13 = fpext float %12 to double
  %14 = load double, ptr %loss_sum, align 8
  %15 = fadd double %14, %13
  store double %15, ptr %loss_sum, align 8
  %16 = sub i64 %2, 1
  %17 = icmp eq i64 %i, %16
  %18 = and i1 %17, %overlap
  %19 = select i1 %18, ptr %0, ptr null
  call void @backward(ptr %1, ptr %19)
  %20 = add nsw i64 %i, 1
  %21 = icmp slt i64 %20, %2
  br i1 %21, label %loop, label %done

done:                                             ; preds = %loop, %entry
  br i1 %overlap, label %wait_gradients, label %22

wait_gradients:                                   ; preds = %done
  call void @trc_step_wait_gradients(ptr %0)
  br label %22

22:                                               ; preds = %wait_gradients, %done
  %23 = xor i1 %overlap, true
  %24 = and i1 %4, %23
  br i1 %24, label %allreduce_gradients, label %25

allreduce_gradients:                              ; preds = %22
  call void @trc_step_allreduce_gradients(ptr %0)
  br label %25

25:                                               ; preds = %allreduce_gradients, %22
  %26 = sitofp i64 %2 to double
  %27 = load double, ptr %loss_sum, align 8
  %loss = fdiv double %27, %26
  %28 = call double @llvm.fabs.f64(double %loss)
  %29 = fcmp one double %28, 0x7FF0000000000000
  br i1 %29, label %update, label %not_finite

update:                                           ; preds = %25
  call void @trc_step_clip_gradients(ptr %0)
  call void @trc_step_update(ptr %0)
  %30 = call i32 @trc_step_ends_round(ptr %0)
  %31 = icmp ne i32 %30, 0
  br i1 %31, label %average_parameters, label %32

not_finite:                                       ; preds = %25
  ret double %loss

average_parameters:                               ; preds = %update
  call void @trc_step_average_parameters(ptr %0)
  br label %32

32:                                               ; preds = %average_parameters, %update
  ret double %loss
}

declare ptr @trc_step_arena(ptr)

declare i64 @trc_step_micro_batches(ptr)

declare i32 @trc_step_averages_gradients(ptr)

declare i32 @trc_step_overlaps(ptr)

declare float @trc_step_loss_seed(ptr)

; Function Attrs: nocallback nofree nounwind willreturn memory(argmem: write)
declare void @llvm.memset.p0.i64(ptr nocapture writeonly, i8, i64, i1 immarg) #2

declare void @trc_step_micro_batch(ptr, i64)

declare void @trc_step_wait_gradients(ptr)

declare void @trc_step_allreduce_gradients(ptr)

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare double @llvm.fabs.f64(double) #0

declare void @trc_step_clip_gradients(ptr)

declare void @trc_step_update(ptr)

declare i32 @trc_step_ends_round(ptr)

declare void @trc_step_average_parameters(ptr)

define i32 @main(i32 %0, ptr %1) {
entry:
  %2 = call i32 @trc_main(ptr @model, i32 %0, ptr %1)
  ret i32 %2
}

declare i32 @trc_main(ptr, i32, ptr)

attributes #0 = { nocallback nofree nosync nounwind speculatable willreturn memory(none) }
attributes #1 = { noinline }
attributes #2 = { nocallback nofree nounwind willreturn memory(argmem: write) }
[exit 0]
