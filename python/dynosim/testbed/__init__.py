"""The real testbed (``dynosim testbed``): HAProxy, gunicorn dynos and PostgreSQL run for real
on loopback and measured beside the simulation.

:mod:`.procs` starts and stops its processes (each its own process group, dying with the
testbed however it ends); :mod:`.watchdog` is the separate process that cleans up when the
testbed itself is killed outright.
"""
