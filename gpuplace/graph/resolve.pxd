# Cython's types for resolve.py (an augmenting .pxd: the module's own source is compiled with
# these declarations; see gpuplace/compiled.py). The Python source runs the same code.
import cython

@cython.locals(i=Py_ssize_t, low=Py_ssize_t, high=Py_ssize_t, count=Py_ssize_t, keys=Py_ssize_t,
               shared=bint, has_device=bint, at=Py_ssize_t, p=Py_ssize_t,
               q=Py_ssize_t, types=list, devices_of=list)
cpdef _direct(list items, walker, names, lines)

# Called by _direct as C functions (the loader calls them as Python)
cpdef new_op(str name, str type_, tuple inputs, str device, attrs, tuple outputs,
             str colocate_with, line, str module=*)

cpdef new_ref(str op, index=*)
