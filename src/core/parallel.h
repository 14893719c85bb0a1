// parallel_for over [begin, end) in chunks of at least `grain`, on OpenMP threads.
// Runs serially when called from inside a parallel region (no nested oversubscription).
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace lf {

inline int num_threads() { return omp_get_max_threads(); }
// The calling thread's number in the current parallel region (0 outside one).
inline int thread_id() { return omp_in_parallel() ? omp_get_thread_num() : 0; }

// f(i0, i1) is called on disjoint sub-ranges covering [begin, end).
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int nt = static_cast<int>(std::min<int64_t>(num_threads(), max_chunks));
  if (nt <= 1 || omp_in_parallel()) {
    f(begin, end);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t i0 = begin + t * chunk;
    const int64_t i1 = std::min(end, i0 + chunk);
    if (i0 < i1) f(i0, i1);
  }
}

}  // namespace lf
