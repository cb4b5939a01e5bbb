# Types for the compiled core (gpuplace/compiled.py): Cython reads this beside schedule.py,
# which stays plain Python. Numbers that are only compared or index are C integers in the
# layout's loop; slot and step numbers stay Python ints, since the lists they go into hold
# them as such (a C integer would be boxed again at each).
import cython

@cython.locals(home=list, types=dict, keep=set, slot_info=list, slot_code=list, last_use=list,
               steps=list, allocs=list, starts=list, outs=dict, infos=tuple,
               at=cython.Py_ssize_t, count=cython.Py_ssize_t, n=cython.Py_ssize_t,
               k=cython.Py_ssize_t, edge=cython.Py_ssize_t, producer=cython.Py_ssize_t,
               slot=cython.Py_ssize_t, step=object)
cpdef _add_all(planner, ops, list where, list producers, list arity, outputs, list types_of,
               list specs_of)

cpdef _inputs(Py_ssize_t n, x, y, list slots)

@cython.locals(found=list)
cpdef _in_order(index, names, decisions)

cpdef _output_slot(held, index)

@cython.locals(n=cython.Py_ssize_t, slot=cython.Py_ssize_t, step=cython.Py_ssize_t, at=list)
cpdef _frees(steps, last_use)

cpdef _copy_in(planner, str consumer, ref, src, device, step, list made)
