# Cython's types for estimate.py (an augmenting .pxd: the module's own source is compiled with
# these declarations; see gpuplace/compiled.py). The Python source runs the same code.
import cython

@cython.locals(n=Py_ssize_t, j=Py_ssize_t, k=Py_ssize_t, into="Py_ssize_t[:]")
cpdef _indices(list decided, dict index)

@cython.locals(n=Py_ssize_t, homes=Py_ssize_t, op=Py_ssize_t, r=Py_ssize_t, stop=Py_ssize_t,
               d=Py_ssize_t, p=Py_ssize_t, k=Py_ssize_t, slot=Py_ssize_t, source=Py_ssize_t,
               printing=bint, ready=double, there=double, end=double)
cpdef _steps(const Py_ssize_t[:] dev, const Py_ssize_t[:] producer, const Py_ssize_t[:] output,
             const Py_ssize_t[:] offsets, is_print, const double[:] seconds,
             const Py_ssize_t[:] first, home_size, Py_ssize_t[:] home_last, double[:] done,
             double[:] free_at, double[:] busy, copies, copied, forwarded, copy_of)

@cython.locals(n=Py_ssize_t, j=Py_ssize_t, count="Py_ssize_t[:]", mine=tuple, out=list)
cpdef tuple _home_sizes(tuple sizes)

@cython.locals(n=Py_ssize_t, count=Py_ssize_t, s=Py_ssize_t, t=Py_ssize_t, d=Py_ssize_t,
               allocated="long long[:]", head="Py_ssize_t[:]", below="Py_ssize_t[:]",
               in_use="long long[:]", peak="long long[:]")
cpdef _held_peaks(const Py_ssize_t[:] where, devices, const Py_ssize_t[:] step,
                  const Py_ssize_t[:] last, const long long[:] size)
