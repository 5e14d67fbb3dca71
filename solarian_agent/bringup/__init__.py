"""Bring-up: from a box of parts to a robot that is ready for its first task.

- :mod:`.profile`: the robot profile (what the robot is, which steps are done, the pointing
  check's figures) that bring-up writes and everything else reads.
- ``solarian-agent bringup``: the guided session; ``solarian-agent doctor``: checks a
  configured robot any time.
"""
