/* outputs.c — a run's output paths, checked before anything is loaded or
 * trained, so no work is lost to a path that cannot take its file: each can
 * be written (trc_check_output: an atomic output never replaces a device
 * node, FIFO or directory), none is one of the run's inputs or its own
 * binary, no two are one file. Then the temp files interrupted saves left
 * beside them go.
 *
 * --save may name the --init file: that is read whole at the start, and
 * replaced (atomically) only when the run succeeds, as continuing training
 * in place should. */
#include "rt_io.h"
#include "data/rt_data.h"

#include <string.h>

typedef struct {
  const char *flag, *path;
  int stream;
} output;

/* Fails when `out` is a data file of --data or --eval-data, a --text or
 * --eval-text file, the --init file (which --save may replace), or the
 * running binary: the trainer (or trainc, under `trainc run`). */
static int check_not_input(const trc_model *m, const trc_options *o, const output *out,
                           trc_error *err) {
  const char *dirs[2] = {o->data_dir, o->eval_dir};
  char path[4096];
  trc_error missing; /* reported by the load, not here */
  for (int d = 0; d < 2; d++)
    for (int i = 0; dirs[d] && i < m->n_inputs; i++)
      if (trc_find_input_file(dirs[d], m->inputs[i].name, path, sizeof path, &missing) == 0 &&
          trc_same_file(out->path, path))
        return trc_fail_at(err, out->path, "%s names the input file %s; refusing to overwrite it",
                           out->flag, path);
  const char *texts[4] = {o->text_path, o->eval_text_path, o->pairs_path, o->eval_pairs_path};
  for (int d = 0; d < 4; d++)
    if (texts[d] && trc_same_file(out->path, texts[d]))
      return trc_fail_at(err, out->path, "%s names the text file %s; refusing to overwrite it",
                         out->flag, texts[d]);
  if (trc_same_file(out->path, "/proc/self/exe"))
    return trc_fail_at(err, out->path, "%s names this program's own binary; refusing to "
                       "overwrite it", out->flag);
  if (o->init_path && strcmp(out->flag, "--save") != 0 && trc_same_file(out->path, o->init_path))
    return trc_fail_at(err, out->path, "%s names the --init file; refusing to overwrite it",
                       out->flag);
  return 0;
}

int trc_check_outputs(const trc_model *m, const trc_options *o, int rank, trc_error *err) {
  output outs[4];
  int n = 0;
  if (rank == 0 && o->save_path) outs[n++] = (output){"--save", o->save_path, 0};
  if (rank == 0 && o->log_path) outs[n++] = (output){"--log", o->log_path, 1};
  if (rank == 0 && o->kernel_times_path) outs[n++] = (output){"--kernel-times", o->kernel_times_path, 0};
  if (o->dump_path) outs[n++] = (output){"--dump-step", o->dump_path, 0};
  for (int i = 0; i < n; i++) {
    if (trc_check_output(outs[i].path, outs[i].stream, err) || check_not_input(m, o, &outs[i], err))
      return -1;
    for (int k = 0; k < i; k++)
      if (trc_same_file(outs[i].path, outs[k].path))
        return trc_fail_at(err, outs[i].path, "%s and %s name the same file", outs[k].flag,
                           outs[i].flag);
  }
  for (int i = 0; i < n; i++)
    if (!outs[i].stream) trc_remove_temps_of(outs[i].path);
  return 0;
}
