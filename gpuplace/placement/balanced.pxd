# Cython's types for balanced.py (its augmenting .pxd: the code is balanced.py's, compiled).
import cython

from gpuplace.placement.links cimport Link, walk
from gpuplace.placement.occupancy cimport Occupancy
from gpuplace.placement.timeline cimport Slot, Timeline


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
    cdef public Occupancy occupancy
    cdef public Timeline timeline
    cdef public object network
    cdef public list placed
    cdef public list marks
    cdef public list decisions
    cdef public dict reasons
    cdef public list deferred
    cdef public list reserved


cdef class Draft:
    cdef public object device
    cdef public object first
    cdef public object before
    cdef public object last
    cdef public object total
    cdef public object bound
    cdef public object start
    cdef public object ready
    cdef public object seconds
    cdef public object copies
