# Cython's types for parse_json.py (an augmenting .pxd: the module's own source is compiled with
# these declarations; see gpuplace/compiled.py). The Python source runs the same code.
import cython

@cython.locals(members=Py_ssize_t)
cpdef bint _all_keys_kept(str text, object data)

cdef Py_ssize_t _colons(object value, list stack)
