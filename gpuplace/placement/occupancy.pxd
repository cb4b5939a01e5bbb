# Cython's types for occupancy.py (its augmenting .pxd: the code is occupancy.py's, compiled).


cdef class Occupancy:
    cdef public list limits
    cdef public list tracked
    cdef public object steps
    cdef public list rows
    cdef public list pending
    cdef public list high
