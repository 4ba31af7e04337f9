# Two commands do all set-up: `make test` and `make demo` create .venv when it is missing.
PYTHON ?= python3
VENV := .venv
PY := $(abspath $(VENV))/bin/python
# Spark's Python workers must run the project's interpreter, or they fail to connect back.
export PYSPARK_PYTHON := $(PY)
export PYSPARK_DRIVER_PYTHON := $(PY)
# Bytecode is written and reused (__pycache__/, ignored by git): with PYTHONDONTWRITEBYTECODE=1 in the environment
# (set on these machines and CI's) every broker, CLI run and Spark Python worker compiled the project's sources again
# on import (measured: importing the packages 1.4-2.0 s without bytecode, 0.85 s with it).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: venv peers test demo notebooks bench clean

# pyspark.zip gets bytecode (scripts/pyspark_zip_bytecode.py): every Python process Spark starts imports pyspark
# from it and otherwise compiles it again (0.8 s of CPU each).
# The venv also gets the notebooks' Jupyter kernel "rmq-spark" (ipykernel install --sys-prefix): Jupyter and
# tests/test_notebooks.py then run notebooks with this interpreter.
# editable_mode=compat (setuptools warns that it is transitional): Spark finds Python data sources by listing the
# modules named pyspark_* (pkgutil.iter_modules), which sees compat's path entry but not the import-hook finder of
# the strict and lenient modes (measured: lenient gives DATA_SOURCE_NOT_FOUND for format("rmq")).
$(VENV)/.installed: setup.cfg pyproject.toml setup.py rmq_common/_native.c rmq_common/_encode.c store/_index.c remoting/_frame.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]' --config-settings editable_mode=compat
	$(PY) scripts/pyspark_zip_bytecode.py >/dev/null
	$(PY) -m ipykernel install --sys-prefix --name rmq-spark --display-name "rmq-spark (.venv)" >/dev/null
	touch $@

venv: $(VENV)/.installed

# Stock Apache RocketMQ jars (peers/versions) fetched with Maven into .peers/ for the tests in tests/peers;
# a no-op once fetched.
peers:
	peers/fetch.sh

# ruff first (a second), then the suite on two pytest-xdist workers (most of its time is spent waiting on JVMs,
# brokers and Spark; tests/conftest.py's scheduler keeps each module, and each stock RocketMQ version, on one worker)
# with mypy beside it (settings in pyproject.toml; 20-40 s of one core on a fresh clone, no cache yet): its report is
# shown after the suite's, and either one failing fails the target. TEST_WORKERS=0 runs the suite in one process.
# The venv (pip) and the peers (Maven) are independent downloads: fetched side by side.
TEST_WORKERS ?= 2
test:
	$(MAKE) -j2 venv peers
	$(PY) -m ruff check .
	$(PY) -m compileall -q -j 0 rmq_common store remoting rmq_broker rmq_spark rmq_client rmq_log rmq_cli rmq_acl filters tests pyspark_rmq.py >/dev/null
	@mkdir -p build && rm -f build/mypy.rc
	( nice -n 10 $(PY) -m mypy > build/mypy.log 2>&1; echo $$? > build/mypy.rc ) & \
	$(PY) -m pytest -q -n $(TEST_WORKERS) --durations=40; suite=$$?; \
	wait; echo "mypy:"; cat build/mypy.log; \
	test "$$suite" = 0 && test "$$(cat build/mypy.rc)" = 0

demo: venv
	$(PY) -m rmq_spark.demo

# Execute every notebook in notebooks/ (as the test suite does), outputs kept in memory only.
notebooks: venv
	$(PY) -m pytest -q tests/test_notebooks.py

bench: venv
	$(PY) benchmarks/store_bench.py

clean:
	rm -rf $(VENV) data build *.egg-info .pytest_cache
