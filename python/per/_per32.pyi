# Type stubs of the extension per._per32: per._per's source built with
# float nodes (PER_REAL float), the types of the dtype=float32 classes.
# Its types take and fill float32 arrays where per._per's take float64;
# the stubs are per._per's.
from ._per import Error as Error
from ._per import Rng as Rng
from ._per import _Buffer as _Buffer
from ._per import _CategoricalSampler as _CategoricalSampler
from ._per import _Frames as _Frames
from ._per import _NetServer as _NetServer
from ._per import _NStep as _NStep
from ._per import _SumTree as _SumTree
from ._per import _Traj as _Traj
from ._per import _UniformSampler as _UniformSampler

REAL_SIZE: int
