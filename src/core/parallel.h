// parallel_for over [begin, end) in chunks of at least `grain`, on OpenMP threads.
// Runs serially when called from inside a parallel region (no nested oversubscription).
// A FullTeam scope makes it use every thread however few chunks there are (batch-invariant
// inference).
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace lf {

inline int num_threads() { return omp_get_max_threads(); }
// The calling thread's number in the current parallel region (0 outside one).
inline int thread_id() { return omp_in_parallel() ? omp_get_thread_num() : 0; }

// While a FullTeam lives on a thread, parallel_for called there outside a parallel region
// runs on a team of num_threads() threads even when it has fewer chunks, down to one: a
// product inside a chunk then always runs in a parallel region, single-threaded (oneDNN
// builds a different primitive outside one), whatever the loop's length. Batch-invariant
// inference (Model::set_batch_invariant) holds one for its forward pass, so that a loop over
// the batch's (sequence, head) pairs runs each pair's products the same way for one sequence
// as for many.
class FullTeam {
 public:
  explicit FullTeam(bool on = true) : before_(flag()) { flag() = before_ || on; }
  ~FullTeam() { flag() = before_; }
  FullTeam(const FullTeam&) = delete;
  FullTeam& operator=(const FullTeam&) = delete;
  static bool active() { return flag(); }

 private:
  static bool& flag() {
    static thread_local bool on = false;
    return on;
  }
  bool before_;
};

// f(i0, i1) is called on disjoint sub-ranges covering [begin, end).
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int nt = FullTeam::active()
                     ? num_threads()
                     : static_cast<int>(std::min<int64_t>(num_threads(), max_chunks));
  if (nt <= 1 || omp_in_parallel()) {
    f(begin, end);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    const int64_t chunk = (n + nt - 1) / nt;  // (a full team may leave threads idle)
    const int64_t i0 = begin + t * chunk;
    const int64_t i1 = std::min(end, i0 + chunk);
    if (i0 < i1) f(i0, i1);
  }
}

}  // namespace lf
