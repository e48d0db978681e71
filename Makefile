# Two commands on a fresh machine (each installs what is missing first):
#   make demo   train + evaluate Cascade Mask R-CNN Swin-T on generated shapes
#   make test   the test suite (what CI runs)
#   make test-fast   lint (ruff) and the fast tier, before every commit (docs/testing.md)
PYTHON ?= python3
# The recipes' commands (and the launch scripts the tests start) run this interpreter.
export PYTHON
DEMO_CONFIG := configs/demo/cascade-mask-rcnn_swin-t_shapes.py
DEMO_WORK := work_dirs/demo
DEMO_ITERS := 200

# Both tiers: one pytest-xdist worker per core; tests that share a trained run
# stay on one worker (XDIST_GROUPS in tests/conftest.py). --durations=30
# prints the 30 slowest tests at the end of every run.
JOBS ?= auto
PYTEST := $(PYTHON) -m pytest tests -n $(JOBS) --dist loadgroup -rs --durations=30

.PHONY: install demo test test-fast

install:
	PYTHON=$(PYTHON) bash tools/install.sh

demo: install
	$(PYTHON) tools/make_demo_data.py data/shapes
	$(PYTHON) tools/train.py $(DEMO_CONFIG) --work-dir $(DEMO_WORK)
	$(PYTHON) tools/test.py $(DEMO_CONFIG) $(DEMO_WORK)/iter_$(DEMO_ITERS).pth --work-dir $(DEMO_WORK)

test: install
	$(PYTEST) --whole-suite -v

test-fast: install
	$(PYTHON) -m ruff check .
	$(PYTEST) -m "not slow and not gpu"
