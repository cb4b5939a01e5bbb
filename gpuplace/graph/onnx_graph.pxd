# Types for the compiled core (gpuplace/compiled.py): Cython reads this beside onnx_graph.py,
# which stays plain Python. The importer's state as C fields: the node walk reads them per node
# without an instance dict lookup.

cdef class Importer:
    cdef public object onnx, model, source, limits, graph, names, inferred
    cdef public dict known, made, modules, typeprotos, shapes, specs
    cdef public set weights
    cdef public list ops
