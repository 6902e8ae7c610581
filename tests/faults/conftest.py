import shutil

import pytest


@pytest.fixture(scope="module")
def strace():
    """strace's path; the module's tests skip, saying why, where it is not installed."""
    found = shutil.which("strace")
    if found is None:
        pytest.skip("strace is not installed (.ci/run installs it with apt-get; it could not be installed here)")
    return found
