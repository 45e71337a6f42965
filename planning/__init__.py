"""Planning: fleet size per inhabitants, accessible share, stand capacity, vehicle constraints.

Pure functions over frames and plain data, applied by ``pontual plan`` and the HTTP API.
"""
