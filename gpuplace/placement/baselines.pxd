# Cython's types for baselines.py (an augmenting .pxd: the module's own source is compiled
# with these declarations; see gpuplace/compiled.py). The Python source runs the same code.
import cython

@cython.locals(n=Py_ssize_t, j=Py_ssize_t, k=Py_ssize_t, pick="Py_ssize_t[:]")
cpdef tuple _options(flat, tf, gpus, cpu, dict models, num_gpus)

@cython.locals(n=Py_ssize_t, j=Py_ssize_t, p=Py_ssize_t, r=Py_ssize_t, stop=Py_ssize_t,
               best=double, path=double, kind=Py_ssize_t, gpu_work=double, cpu_work=double,
               chain="double[:]")
cpdef _chains(const Py_ssize_t[:] producer, const Py_ssize_t[:] offsets, const double[:] w,
              const Py_ssize_t[:] where)

@cython.locals(i=Py_ssize_t, n=Py_ssize_t, j=Py_ssize_t, p=Py_ssize_t, r=Py_ssize_t,
               stop=Py_ssize_t, mine=Py_ssize_t, kind=Py_ssize_t, best=double, here=double)
cpdef _stage_pass(const Py_ssize_t[:] members, const Py_ssize_t[:] stage,
                  const Py_ssize_t[:] producer, const Py_ssize_t[:] offsets, const double[:] w,
                  const Py_ssize_t[:] where, double[:] longest, double[:] path,
                  double[:] gpu_work, double[:] cpu_work, Py_ssize_t[:] size)

@cython.locals(i=Py_ssize_t, n=Py_ssize_t, total=double)
cpdef double _total(const double[:] values) except? -1.0

@cython.locals(i=Py_ssize_t, n=Py_ssize_t, j=Py_ssize_t, work=double, copy=double)
cpdef double _fan_in_split(const double[:] works, const double[:] copies,
                           const Py_ssize_t[:] order, double local, double remote) except? -1.0

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, r=Py_ssize_t, into="double[:]")
cpdef _read_sizes(tuple out_bytes, const Py_ssize_t[:] producer, const Py_ssize_t[:] output,
                  const Py_ssize_t[:] at)
