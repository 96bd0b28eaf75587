"""Where aiptrain keeps its state on this machine: the home and the layout of what it holds.

`aiptrain_home()` is the one reader of $AIPTRAIN_HOME, and `HomeLayout` the one place that names
a path under it, so a folder moved or renamed is moved here and nowhere else.
"""

from __future__ import annotations

import os
from pathlib import Path

# The installed aiptrain package (what a supervisor or a Ray node puts on its import path).
PACKAGE_DIR = Path(__file__).resolve().parent


def aiptrain_home() -> Path:
    """$AIPTRAIN_HOME, default ~/.aiptrain; created private (0700) on first use."""
    home = Path(os.environ.get("AIPTRAIN_HOME") or Path.home() / ".aiptrain").expanduser()
    if not home.exists():
        home.mkdir(parents=True, exist_ok=True)
        home.chmod(0o700)
    return home


class HomeLayout:
    """The paths under one aiptrain home (`root`); nothing is created by naming it.

    A plain class, not a dataclass: a build-cache hit imports this module and must stay as cheap
    as interpreter start-up (tests/packaging guards which modules it loads).
    """

    __slots__ = ("_root",)

    def __init__(self, root: Path) -> None:
        self._root = root

    @property
    def root(self) -> Path:
        return self._root

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HomeLayout) and other._root == self._root

    def __hash__(self) -> int:
        return hash(self._root)

    def __repr__(self) -> str:
        return f"HomeLayout({self._root!r})"

    @classmethod
    def of(cls, home: Path | None = None) -> HomeLayout:
        """The layout of `home`, default the configured home (`aiptrain_home()`)."""
        return cls(home if home is not None else aiptrain_home())

    @property
    def storage(self) -> Path:
        """The local object store: `gs://BUCKET/PATH` is `storage/BUCKET/PATH`."""
        return self.root / "storage"

    @property
    def jobs(self) -> Path:
        """The local jobs' own directories (`jobs/PROJECT/JOB_ID`), not their --job-dir."""
        return self.root / "jobs"

    @property
    def jobs_db(self) -> Path:
        """The local job store's SQLite file."""
        return self.root / "jobs.db"

    @property
    def envs(self) -> Path:
        """The runtime environments (unless $AIPTRAIN_ENVS_DIR moves them)."""
        return self.root / "envs"

    @property
    def cache(self) -> Path:
        """Every cache: removing it costs rebuilding, never a job's data."""
        return self.root / "cache"

    @property
    def sdist_cache(self) -> Path:
        """Built trainer packages, one per source tree."""
        return self.cache / "sdist"

    @property
    def site_cache(self) -> Path:
        """Installed packages shared by the jobs' sites."""
        return self.cache / "site"

    @property
    def container_trust_cache(self) -> Path:
        """Container images' CA bundles extended with this installation's CA, one per image."""
        return self.cache / "container-trust"

    @property
    def container_leftovers(self) -> Path:
        """What finished jobs left on a container engine that did not answer (swept when it does)."""
        return self.root / "container-leftovers"

    @property
    def launching(self) -> Path:
        """The locks of the jobs being started (`launching/RUN_TOKEN.lock`)."""
        return self.root / "launching"

    @property
    def dispatch_lock(self) -> Path:
        """The lock held while a queued job is picked to start."""
        return self.root / "dispatch.lock"

    @property
    def emulator(self) -> Path:
        """The records of `aiptrain local serve` (its Vertex jobs, projects)."""
        return self.root / "emulator"

    @property
    def ray_runner_lock(self) -> Path:
        """Held by the one `local serve --backend ray` that runs this home's jobs on Ray."""
        return self.emulator / "ray-runner.lock"

    @property
    def emulator_tokens(self) -> Path:
        """The bearer tokens of the running `aiptrain local serve`s, one file per port."""
        return self.emulator / "tokens"

    @property
    def emulator_grpc(self) -> Path:
        """The gRPC endpoint's TLS certificate and key."""
        return self.emulator / "grpc"

    @property
    def proxy_ca(self) -> Path:
        """The CA behind `local serve`'s proxy: it signs that server's certificates for Google's host
        names, and only processes given its bundle (`aiptrain local env`) trust it."""
        return self.emulator / "proxy-ca"

    @property
    def ca(self) -> Path:
        """This installation's certificate authority (the gs:// endpoint's TLS)."""
        return self.root / "ca"

    @property
    def tmp(self) -> Path:
        """Scratch space of the gs:// and metadata endpoints (uploads in progress, gcloud configurations)."""
        return self.root / "tmp"

    @property
    def tools(self) -> Path:
        """Tools installed on first use (`tools/tensorboard`)."""
        return self.root / "tools"


def serve_token_path(port: int, home: Path | None = None) -> Path:
    """The file holding the bearer token of the `aiptrain local serve` on loopback port `port`.

    The server writes it (0600) when it starts and removes it when it stops; aiptrain's REST
    clients of a loopback endpoint and the gcloud configuration it writes read it from here, so
    nobody copies the token by hand. Another user cannot read it (the home is 0700).
    """
    return HomeLayout.of(home).emulator_tokens / str(port)
