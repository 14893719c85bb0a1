// The single-process Comm and the choice of world() (the MPI one is in comm_mpi.cpp).
#include "dist/comm.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "linformer/error.h"

namespace lf::dist {

#ifdef LINFORMER_HAVE_MPI
Comm* make_mpi_world();      // comm_mpi.cpp
void mpi_abort(int code);    // comm_mpi.cpp: MPI_Abort when MPI is up, else returns
#endif

namespace {

// Processes mpirun started (Open MPI's environment), 0 when not launched by it.
int launched_size() {
  const char* s = std::getenv("OMPI_COMM_WORLD_SIZE");
  return s ? std::atoi(s) : 0;
}

Comm* g_world = nullptr;

Comm* make_world() {
  const int launched = launched_size();
#ifdef LINFORMER_HAVE_MPI
  if (launched > 0) return make_mpi_world();
#else
  LF_CHECK(launched <= 1, "this linformer was built without MPI (LINFORMER_MPI=OFF), but mpirun "
           "started it as ", launched, " processes, which would each run the whole job; rebuild "
           "with libopenmpi-dev installed (see docs/distributed.md) or run one process");
#endif
  return &single_process();
}

}  // namespace

void SingleProcess::broadcast(void*, int64_t, int from, const char* what) {
  LF_CHECK(from == 0, what, ": broadcast from rank ", from, " in a single process");
}

Comm& single_process() {
  static SingleProcess one;
  return one;
}

Comm& world() {
  if (!g_world) g_world = make_world();
  return *g_world;
}

void abort_job(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
#ifdef LINFORMER_HAVE_MPI
  if (g_world && g_world->size() > 1) mpi_abort(code);
#endif
  std::exit(code);
}

}  // namespace lf::dist
