"""The installed package: its distribution name and its namespace, which
holds the API (per.__all__) and nothing it imported for itself."""

import types
from importlib.metadata import version

import per


def test_distribution_is_per_replay():
    # the PyPI name "per" is another project's
    assert version("per-replay") == per.__version__


def test_namespace_is_the_api():
    # per.cuda, per.mpi, per.net, per.seeds and per.server (the per-server
    # command) are submodules, there once imported, and per.config the
    # internal one they share with per
    sub = {n for n in dir(per) if not n.startswith("_")
           and isinstance(getattr(per, n), types.ModuleType)
           and getattr(per, n).__name__ == "per." + n}
    assert sub <= {"config", "cuda", "mpi", "net", "seeds", "server"}, sub
    public = {n for n in dir(per) if not n.startswith("_")} - sub
    assert public == set(per.__all__) - {"__version__"}
    assert all(hasattr(per, n) for n in per.__all__)
    for helper in ("Any", "Dict", "Mapping", "Optional", "Union", "np", "os",
                   "annotations"):
        assert helper not in dir(per), helper
    star = {}
    exec("from per import *", star)
    assert set(star) - {"__builtins__"} == set(per.__all__)
