# Cython's types for balanced.py (its augmenting .pxd: the code is balanced.py's, compiled).
import cython

from gpuplace.placement.links cimport Link, walk


@cython.final
cdef class _Balancer:
    cdef public object times
    cdef public double weight
    cdef public object flat
    cdef public object models
    cdef public object link
    cdef public tuple gpus
    cdef public object cpus
    cdef public list tf
    cdef public object tf_device
    cdef public list groups
    cdef public dict free
    cdef public object occupancy
    cdef public object timeline
    cdef public object network
    cdef public list placed
    cdef public list marks
    cdef public list decisions
    cdef public dict reasons
    cdef public list deferred
    cdef public list reserved
