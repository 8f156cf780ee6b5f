define internal void @k46_loop1_range(ptr noalias %0, ptr noalias %1, ptr noalias %2, i64 %3, i64 %4) #0 {
entry:
  %t = alloca float, align 4
  %t1 = alloca float, align 4
  %5 = sub nsw i64 %4, %3
  %6 = icmp sgt i64 %5, 0
  br i1 %6, label %loop, label %done19

loop:                                             ; preds = %done18, %entry
  %i = phi i64 [ 0, %entry ], [ %79, %done18 ]
  %7 = add nsw i64 %3, %i
  br label %loop2

loop2:                                            ; preds = %done17, %loop
  %i3 = phi i64 [ 0, %loop ], [ %77, %done17 ]
  br label %loop4

loop4:                                            ; preds = %done16, %loop2
  %i5 = phi i64 [ 0, %loop2 ], [ %75, %done16 ]
  store float 0xFFF0000000000000, ptr %t, align 4
  store float 0.000000e+00, ptr %t1, align 4
  br label %loop6

loop6:                                            ; preds = %done, %loop4
  %i7 = phi i64 [ 0, %loop4 ], [ %37, %done ]
  br label %loop8

loop8:                                            ; preds = %loop8, %loop6
  %i9 = phi i64 [ 0, %loop6 ], [ %35, %loop8 ]
  %8 = mul nsw i64 %7, 8
  %9 = add nsw i64 %i3, %i7
  %10 = add nsw i64 %8, %9
  %11 = mul nsw i64 %10, 8
  %12 = add nsw i64 %i5, %i9
  %13 = add nsw i64 %11, %12
  %14 = getelementptr inbounds float, ptr %0, i64 %13
  %15 = load float, ptr %14, align 4
  %16 = load float, ptr %t, align 4
  %17 = fsub float %15, %16
  %18 = fcmp ogt float %17, 0.000000e+00
  %19 = mul nsw i64 %i7, 3
  %20 = add nsw i64 %19, %i9
  %21 = trunc i64 %20 to i32
  %22 = sitofp i32 %21 to float
  %23 = load float, ptr %t1, align 4
  %24 = select i1 %18, float %22, float %23
  store float %24, ptr %t1, align 4
  %25 = load float, ptr %t, align 4
  %26 = mul nsw i64 %7, 8
  %27 = add nsw i64 %i3, %i7
  %28 = add nsw i64 %26, %27
  %29 = mul nsw i64 %28, 8
  %30 = add nsw i64 %i5, %i9
  %31 = add nsw i64 %29, %30
  %32 = getelementptr inbounds float, ptr %0, i64 %31
  %33 = load float, ptr %32, align 4
  %34 = call float @trc_maxf(float %25, float %33)
  store float %34, ptr %t, align 4
  %35 = add nsw i64 %i9, 1
  %36 = icmp slt i64 %35, 3
  br i1 %36, label %loop8, label %done

done:                                             ; preds = %loop8
  %37 = add nsw i64 %i7, 1
  %38 = icmp slt i64 %37, 3
  br i1 %38, label %loop6, label %done10

done10:                                           ; preds = %done
  br label %loop11

loop11:                                           ; preds = %done15, %done10
  %i12 = phi i64 [ 0, %done10 ], [ %73, %done15 ]
  br label %loop13

loop13:                                           ; preds = %loop13, %loop11
  %i14 = phi i64 [ 0, %loop11 ], [ %71, %loop13 ]
  %39 = mul nsw i64 %7, 8
  %40 = add nsw i64 %i3, %i12
  %41 = add nsw i64 %39, %40
  %42 = mul nsw i64 %41, 8
  %43 = add nsw i64 %i5, %i14
  %44 = add nsw i64 %42, %43
  %45 = load float, ptr %t1, align 4
  %46 = mul nsw i64 %i12, 3
  %47 = add nsw i64 %46, %i14
  %48 = trunc i64 %47 to i32
  %49 = sitofp i32 %48 to float
  %50 = fsub float %45, %49
  %51 = load float, ptr %t1, align 4
  %52 = mul nsw i64 %i12, 3
  %53 = add nsw i64 %52, %i14
  %54 = trunc i64 %53 to i32
  %55 = sitofp i32 %54 to float
  %56 = fsub float %51, %55
  %57 = fmul float %50, %56
  %58 = fsub float 5.000000e-01, %57
  %59 = fcmp ogt float %58, 0.000000e+00
  %60 = mul nsw i64 %7, 6
  %61 = add nsw i64 %60, %i3
  %62 = mul nsw i64 %61, 6
  %63 = add nsw i64 %62, %i5
  %64 = getelementptr inbounds float, ptr %1, i64 %63
  %65 = load float, ptr %64, align 4
  %66 = select i1 %59, float %65, float 0.000000e+00
  %67 = getelementptr inbounds float, ptr %2, i64 %44
  %68 = load float, ptr %67, align 4
  %69 = fadd float %68, %66
  %70 = getelementptr inbounds float, ptr %2, i64 %44
  store float %69, ptr %70, align 4
  %71 = add nsw i64 %i14, 1
  %72 = icmp slt i64 %71, 3
  br i1 %72, label %loop13, label %done15

done15:                                           ; preds = %loop13
  %73 = add nsw i64 %i12, 1
  %74 = icmp slt i64 %73, 3
  br i1 %74, label %loop11, label %done16

done16:                                           ; preds = %done15
  %75 = add nsw i64 %i5, 1
  %76 = icmp slt i64 %75, 6
  br i1 %76, label %loop4, label %done17, !llvm.loop !6

done17:                                           ; preds = %done16
  %77 = add nsw i64 %i3, 1
  %78 = icmp slt i64 %77, 6
  br i1 %78, label %loop2, label %done18

done18:                                           ; preds = %done17
  %79 = add nsw i64 %i, 1
  %80 = icmp slt i64 %79, %5
  br i1 %80, label %loop, label %done19

done19:                                           ; preds = %done18, %entry
  ret void
}
!0 = distinct !{!0, !1, !2}
!1 = !{!"llvm.loop.vectorize.enable", i1 true}
!2 = !{!"llvm.loop.unroll.disable"}
!3 = distinct !{!3, !1, !2}
!4 = distinct !{!4, !2}
!5 = distinct !{!5, !1, !2}
!6 = distinct !{!6, !1, !2}
!7 = distinct !{!7, !2}
!8 = distinct !{!8, !1, !2}
!9 = distinct !{!9, !1, !2}
[exit 0]
