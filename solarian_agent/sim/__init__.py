"""The built-in tabletop simulator: the tidy-up task without hardware, for the ideal
controller's upper bound, the execution strategies under recoverable faults and the
domain-shift test, each over many seeds.

* :mod:`.world` — the 2D tabletop: red cup, yellow paper, tray, bin; the arm's joints with
  speed limits; grasp / release; ground truth (``World.truth()``).  What lies on the table is
  data in :mod:`.tabletop`; :mod:`.layout` draws where it stands; :mod:`.truth` is the
  ground-truth record both backends write.
* :mod:`.faults` — seeded, recoverable fault injection (grasp fails, slips, moved objects,
  frozen cameras).
* :mod:`.camera` — pinhole camera models and the overhead pixel <-> table mapping
  (``project`` / ``unproject``).
* :mod:`.render` — OpenCV rendering of the overhead and wrist cameras; ``VisualStyle`` for the
  domain-shift test.
* :mod:`.component` — ``SimWorldComponent``: the world on the bus (joint states, images,
  camera info, ground truth; ``sim/reset``, ``sim/inject_fault``).
* :mod:`.ideal` — the ideal controller (reads the truth; the task's upper bound).
* :mod:`.benchmark` — steps/s, renders/s, tidy-up episodes per minute.

The arm's kinematics live in :mod:`solarian_agent.arm.kinematics`.
"""
