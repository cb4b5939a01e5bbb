# Types for the compiled core (gpuplace/compiled.py): Cython reads this beside executor.py,
# which stays plain Python. The run's loop: a step's kernel index and slots as C integers.
import cython

@cython.locals(step=list, kernel=cython.Py_ssize_t, x=object, y=cython.Py_ssize_t,
               first=cython.Py_ssize_t, count=cython.Py_ssize_t,
               slot=cython.Py_ssize_t, i=cython.Py_ssize_t)
cpdef _run_steps(state, steps, tuple table, list values, backend, list failed)
