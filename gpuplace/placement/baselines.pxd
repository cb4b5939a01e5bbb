# Cython's types for baselines.py (an augmenting .pxd: the module's own source is compiled
# with these declarations; see gpuplace/compiled.py). The Python source runs the same code.
import cython

@cython.locals(j=Py_ssize_t, p=Py_ssize_t, best=double, x=double, kind=long,
               gpu_work=double, cpu_work=double)
cpdef _chains(inputs, w, where)

@cython.locals(j=Py_ssize_t, p=Py_ssize_t, mine=Py_ssize_t, previous=Py_ssize_t, kind=long,
               best=double, here=double)
cpdef _stage_pass(members, stage, before, inputs, w, where, longest, path,
                  gpu_work, cpu_work, size, readers)
