// The communication of data-parallel training (docs/distributed.md), behind one small
// interface with two implementations: MPI (comm_mpi.cpp, when built with LINFORMER_MPI and
// launched by mpirun) and a single process (every operation is the identity).
//
// Collectives must be called by every rank in the same order. A failed MPI operation throws
// lf::Error naming it (`what`) and the rank; the caller ends the job (linformer's main calls
// distributed_abort, which takes every rank down).
#pragma once
#include <cstdint>
#include <string>

namespace lf::dist {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  bool root() const { return rank() == 0; }
  // "single process" or e.g. "MPI (Open MPI v4.1.4), rank 0 of 2 on host"
  virtual std::string describe() const = 0;

  // Blocking element-wise reductions over the ranks, in place: every rank gets the result.
  virtual void sum(float* x, int64_t n, const char* what) = 0;
  virtual void sum(double* x, int64_t n, const char* what) = 0;
  virtual void sum(int64_t* x, int64_t n, const char* what) = 0;
  virtual void max(int64_t* x, int64_t n, const char* what) = 0;
  virtual void min(int64_t* x, int64_t n, const char* what) = 0;
  virtual void max(double* x, int64_t n, const char* what) = 0;
  // Rank `from`'s bytes into every rank's buffer.
  virtual void broadcast(void* data, int64_t bytes, int from, const char* what) = 0;
  virtual void barrier(const char* what) = 0;

  // Non-blocking in-place sum of floats (MPI_Iallreduce): starts it and returns at once; the
  // buffer must not be touched until wait_all() returns. progress() lets the started
  // operations advance (MPI moves data only inside its calls); wait_all() waits for all of
  // them. `what` names the operation in an error message.
  virtual void start_sum(float* x, int64_t n, const char* what) = 0;
  virtual void progress() = 0;
  virtual void wait_all() = 0;
};

// The process group of this process: MPI when launched by mpirun (Open MPI sets
// OMPI_COMM_WORLD_SIZE) and built with MPI, else a single process. MPI is initialised on the
// first call (MPI_Init_thread, MPI_THREAD_FUNNELED: only the main thread communicates) and
// finalised at exit. Launched by mpirun with several processes but built without MPI: throws
// lf::Error saying so (the processes would otherwise each run the whole job).
Comm& world();
// Ends every process of the job (MPI_Abort) with `code`; a single process just exits.
[[noreturn]] void abort_job(int code);

// One process: every reduction and the barrier are the identity, a broadcast must come from
// rank 0. Tests derive fakes from it.
class SingleProcess : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "single process"; }
  void sum(float*, int64_t, const char*) override {}
  void sum(double*, int64_t, const char*) override {}
  void sum(int64_t*, int64_t, const char*) override {}
  void max(int64_t*, int64_t, const char*) override {}
  void min(int64_t*, int64_t, const char*) override {}
  void max(double*, int64_t, const char*) override {}
  void broadcast(void*, int64_t, int from, const char* what) override;
  void barrier(const char*) override {}
  void start_sum(float*, int64_t, const char*) override {}
  void progress() override {}
  void wait_all() override {}
};

// The single-process communicator (tests use it directly).
Comm& single_process();

}  // namespace lf::dist
