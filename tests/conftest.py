from __future__ import annotations

import atexit
import shutil
import tempfile

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

from ofuzz.gen.corpus import load_corpus

# nothing a test run writes lands in the checkout: no example database (pytest's cache is off in pyproject.toml)
settings.register_profile("ofuzz", database=None)
settings.load_profile("ofuzz")
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="ofuzz-hypothesis-")  # its other caches (constants) go to a temp dir
set_hypothesis_home_dir(_HYPOTHESIS_HOME)
atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, True)


@pytest.fixture(scope="session")
def corpus():
    return load_corpus()
