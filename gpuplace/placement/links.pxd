# Cython's types for links.py (its augmenting .pxd: the code is links.py's, compiled).
import cython


cdef class Link:
    cdef public list starts
    cdef public list ends

    @cython.locals(start=cython.double, end=cython.double, i=cython.Py_ssize_t, starts=list,
                   ends=list)
    cpdef book(self, pieces)

    @cython.locals(i=cython.Py_ssize_t, j=cython.Py_ssize_t, starts=list, ends=list)
    cpdef cover(self, double start, double end)


@cython.locals(t=cython.double, need=cython.double, idle=cython.double, end=cython.double,
               start=cython.double, pieces=list, starts_of=list, ends_of=list, at=list,
               link=Link, ends=list, starts=list, i=cython.Py_ssize_t, n=cython.Py_ssize_t,
               k=cython.Py_ssize_t, count=cython.Py_ssize_t, clean=cython.Py_ssize_t)
cpdef walk(Link out, Link into, double ready, double length, Link held, known)



@cython.locals(hi=cython.Py_ssize_t, step=cython.Py_ssize_t, k=cython.Py_ssize_t,
               mid=cython.Py_ssize_t, value=cython.double)
cpdef Py_ssize_t _search(list values, double x, Py_ssize_t lo, bint right)
