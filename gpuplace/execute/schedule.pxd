# Types for the compiled core (gpuplace/compiled.py): Cython reads this beside schedule.py,
# which stays plain Python. Numbers that are only compared are C integers in the layout's loop;
# slot and step numbers stay Python ints, since the lists they go into hold them as such.
import cython

@cython.locals(home=dict, types=dict, keep=set, slot_info=list, last_use=list,
               steps=list, allocs=list, outs=dict, infos=tuple,
               device=cython.Py_ssize_t, count=cython.Py_ssize_t, n=cython.Py_ssize_t)
cpdef _add_all(planner, ops)

@cython.locals(n=cython.Py_ssize_t, slot=cython.Py_ssize_t, step=cython.Py_ssize_t, at=list)
cpdef _frees(steps, last_use)
