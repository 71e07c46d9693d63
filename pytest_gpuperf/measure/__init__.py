"""Measuring: warm-up, block sizing, rounds and adaptive stopping, on a clock and behind a host guard.

``runner`` runs a measurement; ``timers`` are its clocks (wall clock on a CPU, CUDA events on a GPU),
``stopping`` the one stopping rule, ``time_limit`` the hard stop, ``allocator`` the C allocator's state,
``env`` the environment probes, ``host`` the guards of the machine it runs on, ``profiled`` one side of a
differential profile taken by the runner.

May import: ``profiling``, ``gpu``, ``verdict`` (the host guards' rules), the model and the leaves; never the
engines, workers, reports, history or the pytest layer.
"""
