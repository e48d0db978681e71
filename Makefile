# Two commands on a fresh machine (each installs what is missing first):
#   make demo   train + evaluate Cascade Mask R-CNN Swin-T on generated shapes
#   make test   the test suite
PYTHON ?= python3
# The recipes' commands (and the launch scripts the tests start) run this interpreter.
export PYTHON
DEMO_CONFIG := configs/demo/cascade-mask-rcnn_swin-t_shapes.py
DEMO_WORK := work_dirs/demo
DEMO_ITERS := 200

.PHONY: install demo test

install:
	PYTHON=$(PYTHON) bash tools/install.sh

demo: install
	$(PYTHON) tools/make_demo_data.py data/shapes
	$(PYTHON) tools/train.py $(DEMO_CONFIG) --work-dir $(DEMO_WORK)
	$(PYTHON) tools/test.py $(DEMO_CONFIG) $(DEMO_WORK)/iter_$(DEMO_ITERS).pth --work-dir $(DEMO_WORK)

test: install
	$(PYTHON) -m pytest tests --whole-suite -v -rs --durations=20
