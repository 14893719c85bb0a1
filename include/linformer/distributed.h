// Data-parallel training on several processes: `mpirun -np R linformer pretrain ...` (and
// `finetune`) runs R ranks that each take a slice of every batch and average their gradients
// (docs/distributed.md). The same program runs as one process without mpirun.
#pragma once

namespace lf {

struct DistributedInfo {
  int rank = 0;  // this process, 0 .. size-1; rank 0 prints and writes the run folder
  int size = 1;  // processes in the job
};

// This process's place in the job. The first call sets up MPI when the program was launched
// by mpirun and built with MPI (LINFORMER_MPI); otherwise the job is this one process. Throws
// lf::Error when mpirun started several processes of a build without MPI.
DistributedInfo distributed_info();

// Ends the whole job after a failure on this process: MPI_Abort when several ranks run, so
// that the others do not wait for it forever; otherwise std::exit(code).
[[noreturn]] void distributed_abort(int code);

}  // namespace lf
