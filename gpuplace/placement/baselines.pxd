# Cython's types for baselines.py (an augmenting .pxd: the module's own source is compiled
# with these declarations; see gpuplace/compiled.py). The Python source runs the same code.
import cython

@cython.locals(n=Py_ssize_t, j=Py_ssize_t, p=Py_ssize_t, r=Py_ssize_t, stop=Py_ssize_t,
               best=double, x=double, kind=long, gpu_work=double, cpu_work=double)
cpdef _chains(const Py_ssize_t[:] producer, const Py_ssize_t[:] offsets, w, where)

@cython.locals(i=Py_ssize_t, n=Py_ssize_t, j=Py_ssize_t, p=Py_ssize_t, r=Py_ssize_t,
               stop=Py_ssize_t, mine=Py_ssize_t, previous=Py_ssize_t, kind=long, best=double,
               here=double)
cpdef _stage_pass(const Py_ssize_t[:] members, const Py_ssize_t[:] stage, before,
                  const Py_ssize_t[:] producer, const Py_ssize_t[:] offsets, const double[:] w,
                  const Py_ssize_t[:] where, double[:] longest, double[:] path,
                  double[:] gpu_work, double[:] cpu_work, Py_ssize_t[:] size, readers)

@cython.locals(p=Py_ssize_t, out=Py_ssize_t, r=Py_ssize_t, stop=Py_ssize_t, known=Py_ssize_t)
cpdef _fan_in_reads(const Py_ssize_t[:] producer, const Py_ssize_t[:] output,
                    const Py_ssize_t[:] offsets, const Py_ssize_t[:] stage, Py_ssize_t cut,
                    Py_ssize_t k, Py_ssize_t[:] first)

@cython.locals(i=Py_ssize_t, n=Py_ssize_t, j=Py_ssize_t, work=double, copy=double)
cpdef double _fan_in_split(works, copies, const Py_ssize_t[:] order, double local,
                           double remote) except? -1.0

@cython.locals(j=Py_ssize_t, r=Py_ssize_t, stop=Py_ssize_t)
cpdef _outputs_read(const Py_ssize_t[:] producer, const Py_ssize_t[:] output,
                    const Py_ssize_t[:] offsets, readers, Py_ssize_t at)
