"""The tests of test_submission_official on the v6.0 tree: Mixtral-8x7B (its last round) in v6.0's layout.
A module of its own so that pytest-xdist runs it on either worker beside the other rounds' trees."""
from tests.test_submission_official import *  # noqa: F401,F403 (the tree fixture and its tests, collected here)

ROUND = "v6.0"
