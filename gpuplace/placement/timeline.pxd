# Cython's types for timeline.py (its augmenting .pxd: the code is timeline.py's, compiled).
import cython

from gpuplace.placement.links cimport Link, walk
from gpuplace.placement.occupancy cimport Occupancy


cdef class Slot:
    cdef public object device
    cdef public object size
    cdef public object step
    cdef public object last
    cdef public object ready


cdef class Timeline:
    cdef public object flat
    cdef public object link
    cdef public Occupancy occupancy
    cdef public object network
    cdef public list nic_out
    cdef public list nic_in
    cdef public list done
    cdef public list home
    cdef public dict copied
    cdef public list sent
    cdef public list slots
    cdef public list free_at
    cdef public list outbound
    cdef public list inbound
    cdef public dict solid

    @cython.locals(mask=long)
    cpdef copy_of(self, producer, output, Py_ssize_t device)


cdef long _BITS
