# The README's two commands: `make demo` and `make test`. Both set up .venv by themselves.
# `make test` also sets up ROS 2 Jazzy from PyPI wheels (`make ros`) and runs the ROS tests on
# real rclpy: the wheels go into .venv, the package's interfaces are built from CMakeLists.txt
# into build/ros/install; both are cached and redone when their inputs change.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ROS_WHEELS := $(VENV)/.ros-wheels
ROS_BUILT := build/ros/.built
INTERFACES := $(wildcard msg/*.msg srv/*.srv action/*.action)

# the SO-101's STL meshes into ~/.cache/solarian_agent/meshes/so101 (or $$SOLARIAN_MESH_DIR);
# demo and test go on without them (one line says so) and draw the arm with boxes
meshes: $(STAMP)
	$(PY) scripts/fetch_meshes.py

.PHONY: meshes demo test bench mutate lint typecheck clean clean-mutants venv ros ros-check

venv: $(STAMP)

$(STAMP): setup.py pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

# ROS 2 Jazzy from PyPI wheels (ros-jazzy-rclpy[fastrtps], the message packages and the
# interface generators, pinned in requirements-ros-wheels.txt); then the package's interfaces
# built from CMakeLists.txt into build/ros/install
$(ROS_WHEELS): requirements-ros-wheels.txt $(STAMP)
	$(PY) scripts/ros_wheels.py install
	touch $(ROS_WHEELS)

$(ROS_BUILT): $(ROS_WHEELS) CMakeLists.txt package.xml $(INTERFACES)
	$(PY) scripts/ros_wheels.py build
	$(PY) scripts/ros_wheels.py check
	touch $(ROS_BUILT)

ros: $(ROS_BUILT)

ros-check: $(ROS_BUILT)
	$(PY) scripts/ros_wheels.py check

demo: $(STAMP)
	$(PY) scripts/fetch_meshes.py --soft
	$(VENV)/bin/solarian-agent demo

# SOLARIAN_REQUIRE_ROS: a missing or broken ROS set-up fails the ROS tests, never skips them
test: $(STAMP) $(ROS_BUILT)
	sh scripts/install_browser.sh
	sh scripts/install_gl.sh
	$(PY) scripts/fetch_meshes.py --soft
	$(PY) -m ruff check solarian_agent test scripts
	$(PY) -m mypy
	SOLARIAN_REQUIRE_ROS=1 $(PY) -m pytest -q

bench: $(STAMP) $(ROS_BUILT)
	$(VENV)/bin/solarian-agent bench

# mutation testing of the safety and correctness modules ([tool.mutmut] in pyproject.toml):
# one worker, niced, stopped at MUTATE_BUDGET_S seconds (default 5400; mutants/ keeps the
# results, so a second run goes on); not part of `make test`.  MODULE=path runs one module;
# RETEST=1 reruns only the mutants not killed yet (after new tests).
# The report (test-artifacts/mutation/report.json) is `solarian-agent bench mutate`.
mutate: $(STAMP)
	$(PY) scripts/mutate.py $(if $(MODULE),--module $(MODULE)) $(if $(RETEST),--retest)

lint: $(STAMP)
	$(PY) -m ruff check solarian_agent test scripts

typecheck: $(STAMP)
	$(PY) -m mypy

clean:
	rm -rf $(VENV) build *.egg-info

# mutmut's cached results (hours to measure again): apart from clean on purpose
clean-mutants:
	rm -rf mutants
