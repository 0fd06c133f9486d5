/* Stream capture and graphs for the SIMT emulation: the twin of CUDA graphs
 * (cudaStreamBeginCapture / EndCapture, cudaGraphInstantiate,
 * cudaGraphExecUpdate, cudaGraphLaunch) that tests/cudabe/rt_emu.c puts
 * behind the runtime table. A plain C header.
 *
 * While a host thread captures, its kernel launches (simt_emu.h's launch)
 * and the copies and fills it records here are not run: each becomes a
 * node, with the kernel's parameters copied as CUDA copies them at launch.
 * A graph is the node list in capture order; launching an executable graph
 * runs its nodes in that order (one stream: CUDA's capture of one stream is
 * a chain too). A copy node reads its source when it runs, as on a GPU, so
 * a source that changed or was freed after capture is read as it is then.
 *
 * Updating an executable graph from a newly captured one succeeds when both
 * have the same nodes in the same order (kinds and, for kernels, the same
 * kernel function): the parameters, grids, sizes and addresses are taken
 * from the new one; otherwise the update fails and the executable graph is
 * unchanged (CUDA's rule for a topology change). */
#ifndef BRISK_TESTS_SIMT_GRAPH_H
#define BRISK_TESTS_SIMT_GRAPH_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brisk_simt_graph brisk_simt_graph;

/* Starts capturing on this host thread; 1 if it already captures. */
int brisk_simt_capture_begin(void);
bool brisk_simt_capturing(void);
/* Records a copy (memmove semantics) or a fill while capturing. */
int brisk_simt_capture_copy(void *dst, const void *src, size_t bytes);
int brisk_simt_capture_fill(void *dst, int value, size_t bytes);
/* Ends the capture; *out receives the graph (NULL if none was capturing: 1). */
int brisk_simt_capture_end(brisk_simt_graph **out);
/* An executable graph from a captured one (a copy of its nodes, which share
 * the kernels' parameters); g stays the caller's to free. */
int brisk_simt_graph_instantiate(const brisk_simt_graph *g, brisk_simt_graph **exec);
/* 0, or 910 (cudaErrorGraphExecUpdateFailure) when the topologies differ. */
int brisk_simt_graph_update(brisk_simt_graph *exec, const brisk_simt_graph *g);
/* Runs every node in order; the first failing kernel's status. */
int brisk_simt_graph_launch(const brisk_simt_graph *exec);
void brisk_simt_graph_free(brisk_simt_graph *g);
/* Nodes of a graph (tests). */
size_t brisk_simt_graph_nodes(const brisk_simt_graph *g);

#ifdef __cplusplus
}
#endif

#endif
