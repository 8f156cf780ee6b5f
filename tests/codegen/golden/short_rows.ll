define internal void @k46_loop1_range(ptr noalias %0, ptr noalias %1, ptr noalias %2, i64 %3, i64 %4) #0 {
entry:
  %t = alloca float, align 4
  %t1 = alloca float, align 4
  %5 = sub nsw i64 %4, %3
  %6 = icmp sgt i64 %5, 0
  br i1 %6, label %loop, label %done19

loop:                                             ; preds = %done18, %entry
  %i = phi i64 [ 0, %entry ], [ %76, %done18 ]
  %7 = add nsw i64 %3, %i
  br label %loop2

loop2:                                            ; preds = %done17, %loop
  %i3 = phi i64 [ 0, %loop ], [ %74, %done17 ]
  br label %loop4

loop4:                                            ; preds = %done16, %loop2
  %i5 = phi i64 [ 0, %loop2 ], [ %72, %done16 ]
  store float 0xFFF0000000000000, ptr %t, align 4
  store float 0.000000e+00, ptr %t1, align 4
  br label %loop6

loop6:                                            ; preds = %done, %loop4
  %i7 = phi i64 [ 0, %loop4 ], [ %36, %done ]
  br label %loop8

loop8:                                            ; preds = %loop8, %loop6
  %i9 = phi i64 [ 0, %loop6 ], [ %34, %loop8 ]
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
  %21 = sitofp i64 %20 to float
  %22 = load float, ptr %t1, align 4
  %23 = select i1 %18, float %21, float %22
  store float %23, ptr %t1, align 4
  %24 = load float, ptr %t, align 4
  %25 = mul nsw i64 %7, 8
  %26 = add nsw i64 %i3, %i7
  %27 = add nsw i64 %25, %26
  %28 = mul nsw i64 %27, 8
  %29 = add nsw i64 %i5, %i9
  %30 = add nsw i64 %28, %29
  %31 = getelementptr inbounds float, ptr %0, i64 %30
  %32 = load float, ptr %31, align 4
  %33 = call float @trc_maxf(float %24, float %32)
  store float %33, ptr %t, align 4
  %34 = add nsw i64 %i9, 1
  %35 = icmp slt i64 %34, 3
  br i1 %35, label %loop8, label %done

done:                                             ; preds = %loop8
  %36 = add nsw i64 %i7, 1
  %37 = icmp slt i64 %36, 3
  br i1 %37, label %loop6, label %done10

done10:                                           ; preds = %done
  br label %loop11

loop11:                                           ; preds = %done15, %done10
  %i12 = phi i64 [ 0, %done10 ], [ %70, %done15 ]
  br label %loop13

loop13:                                           ; preds = %loop13, %loop11
  %i14 = phi i64 [ 0, %loop11 ], [ %68, %loop13 ]
  %38 = mul nsw i64 %7, 8
  %39 = add nsw i64 %i3, %i12
  %40 = add nsw i64 %38, %39
  %41 = mul nsw i64 %40, 8
  %42 = add nsw i64 %i5, %i14
  %43 = add nsw i64 %41, %42
  %44 = load float, ptr %t1, align 4
  %45 = mul nsw i64 %i12, 3
  %46 = add nsw i64 %45, %i14
  %47 = sitofp i64 %46 to float
  %48 = fsub float %44, %47
  %49 = load float, ptr %t1, align 4
  %50 = mul nsw i64 %i12, 3
  %51 = add nsw i64 %50, %i14
  %52 = sitofp i64 %51 to float
  %53 = fsub float %49, %52
  %54 = fmul float %48, %53
  %55 = fsub float 5.000000e-01, %54
  %56 = fcmp ogt float %55, 0.000000e+00
  %57 = mul nsw i64 %7, 6
  %58 = add nsw i64 %57, %i3
  %59 = mul nsw i64 %58, 6
  %60 = add nsw i64 %59, %i5
  %61 = getelementptr inbounds float, ptr %1, i64 %60
  %62 = load float, ptr %61, align 4
  %63 = select i1 %56, float %62, float 0.000000e+00
  %64 = getelementptr inbounds float, ptr %2, i64 %43
  %65 = load float, ptr %64, align 4
  %66 = fadd float %65, %63
  %67 = getelementptr inbounds float, ptr %2, i64 %43
  store float %66, ptr %67, align 4
  %68 = add nsw i64 %i14, 1
  %69 = icmp slt i64 %68, 3
  br i1 %69, label %loop13, label %done15

done15:                                           ; preds = %loop13
  %70 = add nsw i64 %i12, 1
  %71 = icmp slt i64 %70, 3
  br i1 %71, label %loop11, label %done16

done16:                                           ; preds = %done15
  %72 = add nsw i64 %i5, 1
  %73 = icmp slt i64 %72, 6
  br i1 %73, label %loop4, label %done17, !llvm.loop !5

done17:                                           ; preds = %done16
  %74 = add nsw i64 %i3, 1
  %75 = icmp slt i64 %74, 6
  br i1 %75, label %loop2, label %done18

done18:                                           ; preds = %done17
  %76 = add nsw i64 %i, 1
  %77 = icmp slt i64 %76, %5
  br i1 %77, label %loop, label %done19

done19:                                           ; preds = %done18, %entry
  ret void
}
!0 = distinct !{!0, !1, !2}
!1 = !{!"llvm.loop.vectorize.enable", i1 true}
!2 = !{!"llvm.loop.unroll.disable"}
!3 = distinct !{!3, !2}
!4 = distinct !{!4, !1, !2}
!5 = distinct !{!5, !1, !2}
!6 = distinct !{!6, !2}
!7 = distinct !{!7, !1, !2}
!8 = distinct !{!8, !1, !2}
[exit 0]
