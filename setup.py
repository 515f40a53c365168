"""One distribution, ``fuzzball``.

The top-level folders keep the design card's names (runtime/, plugins/, ...) and install under
``fuzzball_*`` import names so nothing generic lands in site-packages. Every builtin plugin is
registered through entry points here, exactly as a third-party package registers its own.
"""

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

from setuptools import find_packages, setup
from setuptools.command.build_ext import build_ext

# folder in the repository -> import name
PACKAGE_ROOTS = {
    "fuzzball_core": "fuzzball_core",
    "fuzzball_runtime": "runtime",
    "fuzzball_plugins": "plugins",
    "fuzzball_provisioners": "provisioners",
    "fuzzball_federation": "federation",
}


def _packages() -> tuple[list[str], dict[str, str]]:
    packages: list[str] = []
    package_dir: dict[str, str] = {}
    for name, folder in PACKAGE_ROOTS.items():
        packages.append(name)
        package_dir[name] = folder
        for sub in find_packages(where=folder, exclude=["csrc", "csrc.*"]):
            packages.append(f"{name}.{sub}")
            package_dir[f"{name}.{sub}"] = f"{folder}/{sub.replace('.', '/')}"
    return packages, package_dir


PACKAGES, PACKAGE_DIR = _packages()


def _runtime_build_script() -> ModuleType:
    # Loaded by path: importing the package would need the module it is about to build.
    spec = importlib.util.spec_from_file_location("fbrt_build", "runtime/build_ffi.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildExtWithInit(build_ext):
    """build_ext that also links the runtime's static container init next to its module
    (in the build tree for a wheel, and in the source tree too for an editable install)."""

    def _init_path(self) -> Path:
        return Path(self.build_lib) / "fuzzball_runtime" / "fbrt-init"

    def run(self) -> None:
        super().run()
        built = _runtime_build_script().build_init(self._init_path())
        if self.inplace:
            package_dir = self.get_finalized_command("build_py").get_package_dir("fuzzball_runtime")
            shutil.copy2(built, Path(package_dir) / built.name)

    def get_outputs(self) -> list[str]:
        return [*super().get_outputs(), str(self._init_path())]


setup(
    name="fuzzball",
    version="0.1.0",
    description="An open implementation of the Fuzzball HPC/AI workflow platform",
    python_requires=">=3.11",
    packages=PACKAGES,
    package_dir=PACKAGE_DIR,
    package_data={
        "fuzzball_core": [
            "py.typed",
            "**/*.proto",
            "**/*.ini",
            "**/*.mako",
            # the monitoring rules, Alertmanager routes and Grafana dashboards (issue 15)
            "monitoring/rules/*.yml",
            "monitoring/alertmanager/*.yml",
            "monitoring/dashboards/*.json",
            # the Web UI's templates and static files (htmx vendored: no CDN at run time)
            "webui/templates/*.html",
            "webui/static/*",
        ],
        "fuzzball_runtime": ["csrc/*.c", "csrc/*.h"],
        "fuzzball_plugins": ["schedulers/csrc/*.c", "schedulers/csrc/*.h"],
        "fuzzball_federation": ["**/*.mako"],
    },
    include_package_data=True,
    setup_requires=["cffi>=1.16"],
    cffi_modules=[
        "runtime/build_ffi.py:ffibuilder",
        # the default scheduler's free-capacity index
        "plugins/schedulers/build_ffi.py:ffibuilder",
        # the endpoint proxy's request heads (llhttp driven from C)
        "fuzzball_core/orchestrate/csrc/build_ffi.py:ffibuilder",
    ],
    cmdclass={"build_ext": BuildExtWithInit},
    install_requires=[
        "pluggy>=1.5",
        "stevedore>=5.1",
        "cffi>=1.16",
        "click>=8.1",
        "pydantic>=2.6",
        "PyYAML>=6.0",
        "rich>=13",
        "platformdirs>=4",
        "grpcio>=1.60",
        "protobuf>=7.35.1",  # what the committed stubs were generated for
        "httpx>=0.27",
        "SQLAlchemy>=2.0",
        "Jinja2>=3.1",  # the Web UI's server-rendered pages
        "alembic>=1.13",
        "psycopg[binary]>=3.1",
        "aiohttp>=3.9",
        "httptools>=0.6",  # the endpoint proxy's HTTP/1.1 parser (llhttp)
        "uvloop>=0.19",  # the endpoint proxy's and the node agent's event loops (libuv)
        "prometheus-client>=0.20",  # the node metrics endpoint
        "pyroute2>=0.9",  # isolated jobs' namespaces, veths and bridges (netlink)
        "cryptography>=42",  # the local CA and TLS certificates, secrets encrypted at rest
        "argon2-cffi>=23.1",  # password hashes
        "PyJWT[crypto]>=2.8",  # the OIDC issuer's signed access tokens
        "boto3>=1.34",  # s3:// volume ingress and egress on nodes
    ],
    extras_require={
        # the cloud provisioners' SDKs (issue 14), for an Orchestrate that provisions there
        "aws": ["boto3>=1.34"],
        "gcp": ["google-cloud-compute>=1.20"],
        "oci": ["oci>=2.120"],
        "test": [
            "pytest>=8",
            "hypothesis>=6.100",
            "ruff>=0.5",
            "grpcio-tools==1.85.1",  # regenerates the committed stubs byte for byte
            "bcrypt>=4",  # htpasswd entries for the private test registry
            "cryptography>=42",  # signs the test registry's bearer tokens
            "prometheus-client>=0.20",  # parses the node metrics endpoint's text in tests
            "import-linter>=2.1",  # lint-imports: the layering contracts in pyproject.toml
            "mypy>=1.10",
            "schemathesis>=4",  # fuzzes the REST gateway against its served OpenAPI document
            "selenium>=4.20",  # drives Debian's headless chromium in the Web UI tests
            # the gcp and oci provisioners' SDKs, tested against stand-ins (tests/support)
            "google-cloud-compute>=1.20",
            "oci>=2.120",
            # moto's server mode: the stand-in for S3, speaking its wire protocol over HTTP
            "moto[server]>=5",
        ],
    },
    entry_points={
        "console_scripts": [
            "fuzzball = fuzzball_core.cli.entry:main",
            "fuzzball-orchestrate = fuzzball_core.orchestrate.server:main",
            "fuzzball-substrate = fuzzball_core.substrate.main:main",
            "fuzzball-federate = fuzzball_federation.main:main",
            "fuzzball-runtime = fuzzball_runtime.cli:main",
        ],
        "fuzzball.schedulers": [
            "default = fuzzball_plugins.schedulers.default:DefaultScheduler",
        ],
        "fuzzball.provisioners": [
            "local = fuzzball_provisioners.local:LocalProvisioner",
            "onprem = fuzzball_provisioners.onprem:OnPremProvisioner",
            "aws = fuzzball_provisioners.aws:AwsProvisioner",
            "gcp = fuzzball_provisioners.gcp:GcpProvisioner",
            "oci = fuzzball_provisioners.oci:OciProvisioner",
        ],
        "fuzzball.image_backends": [
            "docker = fuzzball_plugins.images.docker_backend:DockerBackend",
            "oras = fuzzball_plugins.images.oras_backend:OrasBackend",
            "fuzzball = fuzzball_plugins.images.object_cache_backend:ObjectCacheBackend",
            "fb = fuzzball_plugins.images.object_cache_backend:ObjectCacheBackend",
        ],
        "fuzzball.routers": [
            "fit = fuzzball_federation.routers.fit:FitRouter",
        ],
        "fuzzball.storage_drivers": [
            "hostpath = fuzzball_plugins.storage.hostpath:HostPathDriver",
            "local = fuzzball_plugins.storage.local:LocalDriver",
            "ephemeral = fuzzball_plugins.storage.ephemeral:EphemeralDriver",
        ],
        "fuzzball.plugins": [
            "nvidia = fuzzball_plugins.devices.nvidia",
            "procfs-metrics = fuzzball_plugins.metrics.procfs",
            "node-health-metrics = fuzzball_plugins.metrics.node_health",
        ],
    },
)
