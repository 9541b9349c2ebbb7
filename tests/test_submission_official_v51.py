"""The tests of test_submission_official on the v5.1 tree: 3D-UNet and DLRM-v2 (its last round) in v5.1's layout (compliance/ and measurements/ beside results/; system_type datacenter,edge).
A module of its own so that pytest-xdist runs it on either worker beside the other rounds' trees."""
from tests.test_submission_official import *  # noqa: F401,F403 (the tree fixture and its tests, collected here)

ROUND = "v5.1"
