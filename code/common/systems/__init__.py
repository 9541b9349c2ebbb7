"""Hardware detection (lazy, injectable) and matching against KnownSystems."""
from code.common.systems.detect import CPUInfo, GPUInfo, SystemInfo, detect  # noqa: F401
from code.common.systems.system_list import KnownSystems, SystemMatch, match_system  # noqa: F401
