"""The process set-up of the PyTorch peers (bench_torch.py, bench_torch_train.py), decided
before torch is imported, from the command line:

  --blas openmp|pthread|system   the OpenBLAS build libblas.so.3 resolves to (PyTorch calls
                                 Debian's libblas.so.3): that build's folder goes first on
                                 LD_LIBRARY_PATH; system keeps the system's alternative
  --malloc jemalloc|system       jemalloc through LD_PRELOAD (PyTorch's recommended allocator
                                 on CPU), or glibc's malloc. jemalloc keeps the pages it frees
                                 (MALLOC_CONF dirty/muzzy decay off, unless MALLOC_CONF is set):
                                 PyTorch allocates fresh tensors in every operation, and with
                                 jemalloc's default decay each step pays first-touch page faults
                                 again (about 1.4 us per 4 KiB page on the machines measured
                                 here), which made its training step 4x slower

Libraries are looked up under / and, first, under $LF_TORCH_LIBS if set: a folder where the
packages were unpacked without installing them, e.g.
  apt-get download libopenblas0-openmp libjemalloc2 && dpkg -x <each>.deb $LF_TORCH_LIBS
The script then runs itself again in the new environment (once)."""
import glob
import os
import sys


def _arg(name, default):
    for i, a in enumerate(sys.argv):
        if a == name and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return default


def _find(pattern):
    roots = [r for r in [os.environ.get("LF_TORCH_LIBS"), "/"] if r]
    for root in roots:
        hits = sorted(glob.glob(os.path.join(root, pattern.lstrip("/"))))
        if hits:
            return hits[0]
    return None


def select(blas_default="openmp", malloc_default="system"):
    """Re-runs the script with the chosen BLAS and malloc unless already done. Returns the
    description of the set-up in effect, e.g. "OpenBLAS openmp build, jemalloc"."""
    blas, malloc = _arg("--blas", blas_default), _arg("--malloc", malloc_default)
    if os.environ.get("LF_TORCH_SETUP") is not None:
        return os.environ["LF_TORCH_SETUP"]
    env = dict(os.environ)
    done = []
    if blas != "system":
        d = _find("/usr/lib/*/openblas-%s" % blas)
        if d:
            env["LD_LIBRARY_PATH"] = ":".join([d] + [p for p in [env.get("LD_LIBRARY_PATH")] if p])
            done.append("OpenBLAS %s build" % blas)
        else:
            print("warning: OpenBLAS %s build not found (libopenblas0-%s; see bench/pytorch/"
                  "torch_setup.py); using the system BLAS" % (blas, blas), file=sys.stderr)
    if not done:
        done.append("system BLAS")
    if malloc == "jemalloc":
        lib = _find("/usr/lib/*/libjemalloc.so.2")
        if lib:
            env["LD_PRELOAD"] = ":".join([lib] + [p for p in [env.get("LD_PRELOAD")] if p])
            env.setdefault("MALLOC_CONF", "dirty_decay_ms:-1,muzzy_decay_ms:-1")
            done.append("jemalloc (%s)" % env["MALLOC_CONF"])
        else:
            print("warning: libjemalloc.so.2 not found (libjemalloc2); using glibc malloc",
                  file=sys.stderr)
    env["LF_TORCH_SETUP"] = ", ".join(done)
    os.execve(sys.executable, [sys.executable] + sys.argv, env)
