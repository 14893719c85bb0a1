#pragma once
// Child processes for the tests that run the linformer program (resume after kill -9, mpirun).

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace lf::test {

// Starts argv[0] with argv, in its own process group, stdout and stderr into `log`, with
// OMP_NUM_THREADS=`threads` and idle OpenMP threads sleeping (OMP_WAIT_POLICY=PASSIVE: no
// effect on the numbers, but a test stays fast on a machine busy with other work). Everything
// the child needs is prepared before fork (the test process may have threads). Returns the
// child's pid, or -1 when the log cannot be opened.
inline pid_t spawn_logged(const std::vector<std::string>& args, const std::string& log,
                          int threads) {
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "OMP_NUM_THREADS=", 16) != 0 &&
        std::strncmp(*e, "OMP_WAIT_POLICY=", 16) != 0)
      env_s.push_back(*e);
  env_s.push_back("OMP_NUM_THREADS=" + std::to_string(threads));
  env_s.push_back("OMP_WAIT_POLICY=PASSIVE");
  std::vector<char*> envp, argv;
  for (auto& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args_s = args;
  for (auto& s : args_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::setpgid(0, 0);  // its own process group: a failed test can end the whole job
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fd);
  return pid;
}

// waitpid, retried when interrupted; the raw status.
inline int wait_status(pid_t pid) {
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return st;
}

}  // namespace lf::test
