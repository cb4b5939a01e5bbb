# Cython's types for arrays.py (an augmenting .pxd: the module's own source is compiled with
# these declarations; see gpuplace/compiled.py). The Python source runs the same code.
import cython

@cython.locals(into="Py_ssize_t[:]")
cpdef int_array(values)

@cython.locals(into="double[:]")
cpdef float_array(values)

ctypedef fused Item:
    Py_ssize_t
    double

@cython.locals(n=Py_ssize_t, i=Py_ssize_t)
cpdef void _fill(values, Item[:] into)
