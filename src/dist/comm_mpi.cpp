// The MPI implementation of Comm (built with LINFORMER_MPI). Every call goes through one
// duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, so that a failed operation comes back
// as an error code that we turn into an lf::Error naming the operation, instead of MPI's
// default of aborting with its own message only.
#ifdef LINFORMER_HAVE_MPI
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "linformer/error.h"

namespace lf::dist {

namespace {

// MPI counts are int: longer buffers go in pieces of at most this many elements.
constexpr int64_t kMaxCount = int64_t{1} << 30;

bool g_up = false;  // MPI initialised by us and not yet finalised
MPI_Comm g_comm = MPI_COMM_NULL;

void finalize_at_exit() {
  if (!g_up) return;
  g_up = false;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (g_comm != MPI_COMM_NULL) MPI_Comm_free(&g_comm);
  MPI_Finalize();
}

template <typename T>
MPI_Datatype type_of();
template <>
MPI_Datatype type_of<float>() { return MPI_FLOAT; }
template <>
MPI_Datatype type_of<double>() { return MPI_DOUBLE; }
template <>
MPI_Datatype type_of<int64_t>() { return MPI_INT64_T; }

class MpiComm final : public Comm {
 public:
  MpiComm() {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    LF_CHECK(rc == MPI_SUCCESS, "MPI_Init_thread failed (error ", rc,
             "): this process cannot join the job that mpirun started");
    g_up = true;
    std::atexit(finalize_at_exit);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Comm_dup(MPI_COMM_WORLD, &g_comm), "MPI_Comm_dup", "start-up");
    MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g_comm, &rank_);
    MPI_Comm_size(g_comm, &size_);
    LF_CHECK(provided >= MPI_THREAD_FUNNELED, "the MPI library offers thread level ", provided,
             ", below MPI_THREAD_FUNNELED (the main thread communicates while OpenMP threads "
             "compute)");
    char host[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    MPI_Get_processor_name(host, &len);
    host_.assign(host, len);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    MPI_Get_library_version(lib, &len);
    lib_.assign(lib, len);
    const size_t cut = lib_.find_first_of(",\n");
    if (cut != std::string::npos) lib_.resize(cut);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override {
    return "MPI (" + lib_ + "), rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
           " on " + host_;
  }

  void sum(float* x, int64_t n, const char* what) override { reduce(x, n, MPI_SUM, what); }
  void sum(double* x, int64_t n, const char* what) override { reduce(x, n, MPI_SUM, what); }
  void sum(int64_t* x, int64_t n, const char* what) override { reduce(x, n, MPI_SUM, what); }
  void max(int64_t* x, int64_t n, const char* what) override { reduce(x, n, MPI_MAX, what); }
  void min(int64_t* x, int64_t n, const char* what) override { reduce(x, n, MPI_MIN, what); }
  void max(double* x, int64_t n, const char* what) override { reduce(x, n, MPI_MAX, what); }

  void broadcast(void* data, int64_t bytes, int from, const char* what) override {
    auto* p = static_cast<char*>(data);
    for (int64_t i = 0; i < bytes; i += kMaxCount)
      check(MPI_Bcast(p + i, static_cast<int>(std::min(kMaxCount, bytes - i)), MPI_BYTE, from,
                      g_comm),
            "MPI_Bcast", what);
  }

  void barrier(const char* what) override { check(MPI_Barrier(g_comm), "MPI_Barrier", what); }

  void start_sum(float* x, int64_t n, const char* what) override {
    for (int64_t i = 0; i < n; i += kMaxCount) {
      MPI_Request r = MPI_REQUEST_NULL;
      check(MPI_Iallreduce(MPI_IN_PLACE, x + i, static_cast<int>(std::min(kMaxCount, n - i)),
                           MPI_FLOAT, MPI_SUM, g_comm, &r),
            "MPI_Iallreduce", what);
      pending_.push_back(r);
      whats_.push_back(what);
    }
  }

  void progress() override {
    if (pending_.empty()) return;
    int done = 0;
    const int rc = MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &done,
                               MPI_STATUSES_IGNORE);
    check(rc, "MPI_Testall", whats_.front().c_str());
  }

  void wait_all() override {
    for (size_t i = 0; i < pending_.size(); ++i)
      check(MPI_Wait(&pending_[i], MPI_STATUS_IGNORE), "MPI_Iallreduce (waiting)",
            whats_[i].c_str());
    pending_.clear();
    whats_.clear();
  }

 private:
  template <typename T>
  void reduce(T* x, int64_t n, MPI_Op op, const char* what) {
    for (int64_t i = 0; i < n; i += kMaxCount)
      check(MPI_Allreduce(MPI_IN_PLACE, x + i, static_cast<int>(std::min(kMaxCount, n - i)),
                          type_of<T>(), op, g_comm),
            "MPI_Allreduce", what);
  }

  void check(int rc, const char* op, const char* what) const {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fail(op, " of ", what, " failed on rank ", rank_, " of ", size_, " (", host_, "): ",
         std::string(msg, len),
         ". Another rank has probably stopped (it failed, was killed or lost its connection), "
         "so the whole job ends; the last checkpoint in the run folder is complete: continue "
         "it with --resume (with any number of ranks that divides the global batch)");
  }

  int rank_ = 0, size_ = 1;
  std::string host_, lib_;
  std::vector<MPI_Request> pending_;
  std::vector<std::string> whats_;
};

}  // namespace

Comm* make_mpi_world() { return new MpiComm(); }

void mpi_abort(int code) {
  if (!g_up) return;
  MPI_Abort(g_comm != MPI_COMM_NULL ? g_comm : MPI_COMM_WORLD, code);
}

}  // namespace lf::dist
#endif  // LINFORMER_HAVE_MPI
