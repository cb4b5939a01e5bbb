# Cython's types for arrays.py (an augmenting .pxd: the module's own source is compiled with
# these declarations; see gpuplace/compiled.py). The Python source runs the same code.
import cython

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, into="Py_ssize_t[:]")
cpdef int_array(values)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, into="double[:]")
cpdef float_array(values)
