# Cython's types for candidates.py (an augmenting .pxd: the module's own source is compiled with
# these declarations; see gpuplace/compiled.py). The Python source runs the same code.
import cython

@cython.locals(at=Py_ssize_t, end=Py_ssize_t, j=Py_ssize_t, g=Py_ssize_t)
cpdef _collect(consumers, producers, arity, generator, assigned)
