/* Multi-process ranks from the public API: joining the MPI world, the
 * worker loop of ranks 1.., and the end of the world (context/tp.h has the
 * protocol; parallel/world.h the world). */
#include "context/tp.h"

#include "core/cpu.h"
#include "core/error.h"
#include "model/model.h"
#include "parallel/world.h"

BRISK_API brisk_status brisk_mpi_world(int32_t *rank, int32_t *size) {
  if (!rank || !size)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_mpi_world: rank and size must be set");
  brisk_comm *w = NULL;
  brisk_status st = brisk_world_join(&w);
  if (st) return st;
  *rank = brisk_comm_rank(w);
  *size = brisk_comm_size(w);
  return BRISK_OK;
}

BRISK_API brisk_status brisk_worker_run(const brisk_model *model, int32_t n_threads) {
  brisk_comm *w = brisk_world();
  if (!model || n_threads < 0 || n_threads > 1024)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_worker_run: a model, and n_threads in [0, 1024]");
  if (!w) return brisk_error(BRISK_E_INVALID_STATE, "brisk_worker_run: call brisk_mpi_world first");
  if (brisk_comm_rank(w) == 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_worker_run: rank 0 owns the contexts; ranks 1.. call this");
  /* The job's processes are the TP ranks, the pipeline stages, or a grid
   * of stages of TP ranks. */
  const int size = brisk_comm_size(w), tp = model->tp_size > 1 ? model->tp_size : 1,
            pp = model->pp_size > 1 ? model->pp_size : 1;
  if (tp * pp != size)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_worker_run: the model must be loaded with tp_size x pp_size = %d "
                       "(the MPI world's size); it has tp_size %d, pp_size %d",
                       size, tp, pp);
  int threads = n_threads > 0 ? n_threads : brisk_cpu_count();
  for (;;) {
    bool ended = false;
    brisk_status st = brisk_tp_serve(model, threads, &ended);
    if (st || ended) return st;
  }
}

BRISK_API void brisk_mpi_finalize(void) {
  if (!brisk_world()) return;
  (void)brisk_tp_end_world();
  brisk_world_leave();
}
