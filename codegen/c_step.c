/* c_step.c — step() as C, for the C and CUDA backends: the step's
 * operations (step.h) printed in order, a backend's own where its StepForm
 * gives one. What the run decides (window, sync mode, clip, optimizer)
 * comes from the trc_step_* calls; the order of the work is the list's. */
#include "c_family.h"

static void print_settings(FILE *out, const Program *p) {
  StepPlaces at = step_places(p);
  fputs("  char *A = trc_step_arena(s);\n", out);
  fprintf(out, "  float *const loss_seed = (float *)(A + %llu);\n", (unsigned long long)at.loss_seed);
  fprintf(out, "  const float *const loss = (const float *)(A + %llu);\n",
          (unsigned long long)at.loss);
  fputs("  const int64_t window = trc_step_micro_batches(s);\n", out);
  fputs("  const int average = trc_step_averages_gradients(s); /* sync gradients, local_sgd_warmup "
        "*/\n",
        out);
  fputs("  trc_step *overlap = average && trc_step_overlaps(s) ? s : NULL;\n", out);
  fputs("  const float seed = trc_step_loss_seed(s); /* 1/window, 1/(window*ranks) when averaged "
        "*/\n",
        out);
  fputs("  double loss_sum = 0.0;\n", out);
}

/* The host's form of each operation (none for a device's copies). */
static void print_op(FILE *out, const Program *p, const StepForm *f, StepOp op) {
  switch (op) {
  case STEP_SETTINGS: print_settings(out, p); break;
  case STEP_ZERO_GRADIENTS:
    fputs("  trc_step_zero_gradients(s); /* a pass only where the last update did not */\n", out);
    break;
  case STEP_WINDOW_BEGIN: fputs("  for (int64_t k = 0; k < window; k++) {\n", out); break;
  case STEP_LOAD_MICRO_BATCH:
    fputs("    trc_step_micro_batch(s, k); /* its rows, dropout key and training flag */\n", out);
    break;
  case STEP_STORE_LOSS_SEED: fputs("    *loss_seed = seed;\n", out); break;
  case STEP_INPUTS_TO_DEVICE: break;
  case STEP_FORWARD: fprintf(out, "    %s;\n", f->forward_call); break;
  case STEP_ADD_LOSS: fputs("    loss_sum += *loss;\n", out); break;
  case STEP_BACKWARD: fprintf(out, "    %sk == window - 1 ? overlap : NULL);\n", f->backward_call); break;
  case STEP_WINDOW_END: fputs("  }\n", out); break;
  case STEP_LOSS_FROM_DEVICE: break;
  case STEP_SYNC_GRADIENTS:
    fprintf(out, "  if (overlap) %swait_gradients(s);\n", step_comm_prefix(f));
    fprintf(out, "  else if (average) %sallreduce_gradients(s);\n", step_comm_prefix(f));
    break;
  case STEP_MEAN_LOSS:
    fputs("  const double mean = loss_sum / (double)window;\n", out);
    fputs("  if (!isfinite(mean)) return mean; /* no update: the runtime stops */\n", out);
    break;
  case STEP_UPDATE: fputs("  trc_step_clip_gradients(s);\n  trc_step_update(s);\n", out); break;
  case STEP_END_ROUND:
    fprintf(out, "  if (trc_step_ends_round(s)) %saverage_parameters(s);\n", step_comm_prefix(f));
    break;
  case STEP_OPS: break;
  }
}

void print_step(FILE *out, const Program *p, const StepForm *f) {
  fputs("/* One optimizer step: the accumulation window's micro-batches, each forward and\n"
        " * backward (with the planner's recompute); with gradients averaged over the\n"
        " * ranks, each bucket's all-reduce starts in the last backward as soon as it is\n"
        " * final (or the whole region's after it); then clipping, the optimizer, and\n"
        " * LocalSGD's parameter average when a round ends. Returns the mean loss. */\n",
        out);
  fputs("static double step(trc_step *s) {\n", out);
  for (int op = 0; op < STEP_OPS; op++) {
    if (f->ops[op]) f->ops[op](out, p);
    else print_op(out, p, f, (StepOp)op);
  }
  fputs("  return mean;\n}\n\n", out);
}
