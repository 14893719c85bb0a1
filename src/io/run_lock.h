// A run folder is used by one process at a time: RunLock holds an exclusive flock on
// RUN/.lock (which names the holder's pid) for its lifetime. The lock dies with the process,
// so a killed run never leaves a stale lock; the file itself stays.
#pragma once
#include <string>

namespace lf {

class RunLock {
 public:
  // Creates the folder if needed and takes the lock, or throws lf::Error
  // "<dir> is in use by process <pid> (<dir>/.lock); ...". `what` names the command.
  RunLock(const std::string& dir, const char* what);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

// Removes what a killed writer left behind in a folder it owned: files named
// "<name>.tmp.<pid>" (write_file_atomic) and folders "<name>.tmp" (checkpoints being
// written), in dir and its direct subfolders. Call with the folder's RunLock held.
void remove_stale_temporaries(const std::string& dir);

}  // namespace lf
