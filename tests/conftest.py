from __future__ import annotations

import pytest

from ofuzz.corpus import load_corpus


@pytest.fixture(scope="session")
def corpus():
    return load_corpus()
