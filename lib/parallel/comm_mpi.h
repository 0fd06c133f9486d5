/* Ranks as MPI processes (Open MPI, optional at build time: BRISK_HAVE_MPI).
 * Each process holds one rank of MPI_COMM_WORLD's duplicate. The collectives
 * keep comm.h's contract: the all-reduce gathers every rank's values and
 * adds them in the fixed tree locally (MPI_Allreduce may add in any order),
 * and every collective first agrees on a status word, so a rank that
 * aborted makes the others return BRISK_E_CANCELLED at the next collective
 * instead of waiting in a mismatched one. Unlike the threads communicator,
 * an aborted rank must still enter the collective its peers are in (the
 * flag travels with it): callers end every step with a collective, which
 * they reach on failure too. A rank that dies outright is MPI's to report
 * (mpirun ends the job). */
#ifndef BRISK_PARALLEL_COMM_MPI_H
#define BRISK_PARALLEL_COMM_MPI_H

#include "parallel/comm.h"

/* This process's rank; initializes MPI if the program has not (and then
 * finalizes it when the handle is freed). */
brisk_status brisk_comm_mpi_world(brisk_comm **out);

/* A part of c's ranks (MPI_Comm_split, collective over c): the ranks that
 * pass the same color (>= 0), ordered by key. Freed on its own (before the
 * world it was split from). */
brisk_status brisk_comm_mpi_split(brisk_comm *c, int color, int key, brisk_comm **out);

#endif
