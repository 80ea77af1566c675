"""Fixtures: `node` (a single plaintext node) and `cluster3` (a 3-node TLS cluster), each started
for one test and killed after it (also when it fails); a failed test's report carries the
nodes' logs."""
from __future__ import annotations

import pytest

from _harness import Deployment, start_cluster, start_single


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for name in ("node", "cluster3"):
            d = getattr(item, "funcargs", {}).get(name)
            if isinstance(d, Deployment):
                report.sections.append((f"leaf node logs ({name})", d.logs()))


def _start(start) -> Deployment:
    try:
        return start()
    except RuntimeError as e:  # no binary: fail (not skip), saying how to build it
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
def node():
    d = _start(start_single)
    yield d
    d.close()


@pytest.fixture
def cluster3():
    d = _start(start_cluster)
    yield d
    d.close()
