# Types for the compiled core (gpuplace/compiled.py): Cython reads this beside plan_records.py,
# which stays plain Python. The op's place in the graph's columns is a C integer.
import cython

@cython.locals(at=cython.Py_ssize_t, names=list, types=list, devices=list, outputs=list,
               after=list)
cpdef _text(graph, placement, skipped, depth)
