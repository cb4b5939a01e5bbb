# Types for the compiled core (gpuplace/compiled.py): Cython reads this beside loads.py, which
# stays plain Python. The counters and indices of the per-op and per-input loops are C
# integers (a Python int is made, added and looked up as an index at each step otherwise);
# byte counts stay Python ints (exact past 64 bits).
import cython

@cython.locals(devices=list, run_ops=cython.Py_ssize_t, same=cython.Py_ssize_t, outputs_of=list)
cpdef tuple copies_and_loads(graph, placement)

@cython.locals(producers=list, arity=list, names=list, outputs_of=list, seen=set, copies=list,
               i=cython.Py_ssize_t, k=cython.Py_ssize_t, j=cython.Py_ssize_t, p=cython.Py_ssize_t)
cpdef list _copies(graph, placement, devices)

@cython.locals(devices=list)
cpdef list decided_devices(decisions)
