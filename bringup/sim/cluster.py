"""A simulated cluster built from real parts, for tests, benchmarks and demos.

Each simulated node is a Linux network namespace with its own address on a private bridge
and a real OpenSSH `sshd` (its own generated host key, root login with a generated key).
The controller reaches the nodes exactly as it reaches real ones: over SSH, with host-key
verification against a `known_hosts` written here, from an Ansible `hosts.ini` written here.

GPU-less nodes get their GPU facts from recordings: each node has a facts file built from
`bringup.sim.demo` (a healthy B300 or one with a planted fault), named by the host variable
`bringup_replay`; the controller answers the recorded probes from it and runs the other
probes (host, nvme by default) for real over SSH.

Each node also has its own `dcgmi` (bringup.sim.dcgm), which prints DCGM's table for the
node's GPUs with every test passed. Faults are real too: an sshd stopped (connection
refused), a node's processes killed mid-run, a node frozen with SIGSTOP (silent, like a
hung kernel), a tool that hangs (a node-local `nvidia-smi` that never answers), packet
loss (nftables), latency (tc netem, where the kernel has it), a rate-limited link (tc
tbf), a host key that changed.

Needs root, `ip` and `tc` (iproute2), `sshd` and `ssh-keygen` (openssh-server), `nft`
(nftables, for packet loss). `SimCluster.available()` says why it cannot run otherwise.
Everything is removed by `stop()`; a crashed run's leftovers are swept at the next start.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import yaml

from bringup.facts import node_facts_text
from bringup.sim.faults import (
    DEFAULT_LIVE,
    FAULTS,
    NVML_LIVE,
    node_facts,
    nvml_state,
    recorded_probes,
    sim_number,
    sim_profile,
)
from bringup.sim.netns import (
    BRIDGE_HOST,
    MAX_NODES,
    NETNS_DIR,
    SSHD,
    SSHD_READY_S,
    STATE_DIR,
    SUBNET,
    SimClusterError,
    banner,
    cmdline,
    keygen,
    netns_pids,
    own_identity,
    run_setup,
    signal_all,
    sweep_and_allocate,
    teardown_run,
    unlimited_memlock,
)
from bringup.sim.rootfs import Image, NodeRoot, RootfsError, ensure_image, first_process
from bringup.sim.rootfs import available as rootfs_available
from bringup.sim.slurm import SimSlurm, SlurmNode

__all__ = ["FAULTS", "NETNS_DIR", "STATE_DIR", "SimCluster", "SimClusterError", "SimNode"]


# --- the cluster -------------------------------------------------------------------------


@dataclasses.dataclass
class SimNode:
    """One simulated node: its namespace, address, files and sshd."""

    name: str
    index: int
    address: str
    netns: str
    veth: str  # the controller's end of the node's link, on the bridge
    dir: Path
    fault: str
    live: tuple[str, ...]
    host_key_line: str = ""
    sshd: subprocess.Popen[bytes] | None = None

    @property
    def host_key(self) -> Path:
        return self.dir / "ssh_host_ed25519_key"

    @property
    def bin_dir(self) -> Path:
        """First on the PATH of the node's SSH sessions: tools installed on this node only."""
        return self.dir / "bin"

    @property
    def cache_dir(self) -> Path:
        """XDG_CACHE_HOME of the node's SSH sessions: bringup/code (the probe code) is there."""
        return self.dir / "cache"

    @property
    def facts_file(self) -> Path:
        return self.dir / "facts.json"

    @property
    def nvml_state(self) -> Path:
        """The node's simulated NVML state (bringup.sim.nvml), read at each nvmlInit."""
        return self.dir / "nvml.json"


class SimCluster:
    """N simulated nodes `node01..nodeNN` reachable over SSH; a context manager."""

    def __init__(
        self,
        nodes: int,
        workdir: Path,
        faults: Mapping[str, str] | None = None,
        live: Mapping[str, Sequence[str]] | None = None,
        nvml: bool | None = None,
        rootfs: Image | None = None,
        slurm: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """`nvml`: give every node its own simulated NVML (bringup.sim.nvml), so its gpu
        probe and telemetry sampler run for real through pynvml; None: where the library
        can be built here (a C compiler, NVIDIA's nvml.h wheel, libcjson), else recordings.

        `rootfs`: give every node its own root filesystem, an overlay over this Debian
        image (bringup.sim.rootfs), for tests that change a node; None: the nodes share
        this machine's filesystem.

        `slurm`: start a real Slurm over the nodes too (bringup.sim.slurm; or call
        start_slurm() later): partition `sim`, a client needs only slurm_env().

        `env`: more environment for every node's sessions, beside node_env()'s own: a
        build the nodes need and should not each make again (the tests give burn-in
        clusters a TORCH_EXTENSIONS_DIR holding DeepSpeed's CPU op, built once a session).
        """
        if not 1 <= nodes <= MAX_NODES:
            raise SimClusterError(f"nodes must be 1..{MAX_NODES}, got {nodes}")
        self.workdir = Path(workdir).resolve()
        self.names = [f"node{i:02d}" for i in range(1, nodes + 1)]
        faults = dict(faults or {})
        live = dict(live or {})
        for name in [*faults, *live]:
            if name not in self.names:
                raise SimClusterError(f"unknown node {name!r}: the cluster has {self.names[0]}..")
        for fault in faults.values():
            if fault not in FAULTS:
                raise SimClusterError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        self._faults = faults
        self._live = {name: tuple(probes) for name, probes in live.items()}
        self._nvml = nvml
        self._rootfs = rootfs
        self._want_slurm = slurm
        self._env = dict(env or {})
        self.slurm: SimSlurm | None = None  # set by start_slurm()
        self.rootfs_image: Path | None = None  # the unpacked image, when rootfs was asked
        self.nvml_library: Path | None = None  # set by start() when the nodes have NVML
        self.nvml_why_not: str | None = None  # why they do not, when nvml was None
        self.run: int | None = None
        self.nodes: dict[str, SimNode] = {}
        self._created: list[Path] = []

    # -- where things are

    @property
    def inventory(self) -> Path:
        return self.workdir / "hosts.ini"

    @property
    def known_hosts(self) -> Path:
        return self.workdir / "known_hosts"

    @property
    def key_file(self) -> Path:
        """The private key root logs in with on every node."""
        return self.workdir / "id_ed25519"

    @property
    def profile_path(self) -> Path:
        return self.workdir / "sim-b300.yaml"

    @property
    def bridge(self) -> str:
        return f"bu-{self.run}-br"

    def node(self, name: str) -> SimNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise SimClusterError(f"unknown node {name!r}") from None

    @staticmethod
    def available() -> str | None:
        """None when a simulated cluster can run here, else the reason it cannot."""
        if os.geteuid() != 0:
            return "needs root (network namespaces, sshd): run as root, as .ci/run does"
        for tool, package in [
            ("ip", "iproute2"),
            ("tc", "iproute2"),
            ("ssh-keygen", "openssh-client"),
            ("nft", "nftables"),
        ]:
            if shutil.which(tool) is None:
                return f"no `{tool}` on PATH (apt-get install {package})"
        if not os.access(SSHD, os.X_OK):
            return f"no {SSHD} (apt-get install openssh-server)"
        probe = f"bu-check-{os.getpid()}"
        made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
        if made.returncode != 0:
            why = (made.stderr.strip().splitlines() or ["unknown error"])[-1]
            return f"cannot create network namespaces here: {why}"
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
        return None

    # -- life cycle

    def __enter__(self) -> SimCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> SimCluster:
        """Create the namespaces, links, keys and sshds; write hosts.ini and known_hosts."""
        reason = self.available()
        if reason:
            raise SimClusterError(reason)
        self.run = sweep_and_allocate()
        atexit.register(self.stop)
        try:
            self._build()
            if self._want_slurm:
                self.start_slurm()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Remove everything: processes, namespaces, links and the files written here."""
        if self.run is None:
            return
        if self.slurm is not None:
            self.slurm.stop()
            self.slurm = None
        teardown_run(self.run)
        for node in self.nodes.values():
            if node.sshd is not None:
                node.sshd.wait()  # reap it (it was killed with its namespace's processes)
        for path in reversed(self._created):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        atexit.unregister(self.stop)
        self.run = None

    def _build(self) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._build_nvml()
        if self._rootfs is not None:
            self._build_rootfs_image()
        default_live = NVML_LIVE if self.nvml_library is not None else DEFAULT_LIVE
        for index, name in enumerate(self.names, start=1):
            live = self._live.get(name, default_live)
            node = SimNode(
                name=name,
                index=index,
                address=f"{SUBNET}.{self.run}.{index}",
                netns=f"bu-{self.run}-n{index}",
                veth=f"bu-{self.run}-v{index}",
                dir=self.workdir / name,
                fault=self._faults.get(name, "healthy"),
                live=live,
            )
            self.nodes[name] = node
        self._create_network()
        self._track(self.key_file, self.key_file.with_name(self.key_file.name + ".pub"))
        client_key = keygen(self.key_file, "bringup-simcluster")
        for node in self.nodes.values():
            self._track(node.dir)
            node.bin_dir.mkdir(parents=True, exist_ok=True)
            self._install_dcgmi(node)
            node.host_key_line = keygen(node.host_key, node.name)
            (node.dir / "authorized_keys_root").write_text(client_key + "\n")
            (node.dir / "sshd_config").write_text(self._sshd_config(node))
            if self.rootfs_image is not None:
                self._node_root(node).prepare(f"{sim_number(node.name):032x}")
            recording = node_facts(node.name, node.fault, node.live)
            node.facts_file.write_text(node_facts_text(recording))
            if self.nvml_library is not None:
                from bringup.sim.nvml import write_state

                write_state(nvml_state(node.fault, node.name), node.nvml_state)
        for node in self.nodes.values():
            node.sshd = self._spawn_sshd(node)
        for node in self.nodes.values():
            self._wait_for_sshd(node)
        self._track(self.profile_path)
        self.profile_path.write_text(yaml.safe_dump(sim_profile(), sort_keys=False))
        self._track(self.known_hosts)
        self.write_known_hosts()
        self._track(self.inventory)
        self.write_inventory()

    # -- Slurm

    def start_slurm(self, extra_conf: Sequence[str] = ()) -> SimSlurm:
        """Start munge, slurmctld (on a head node of its own) and one slurmd per node;
        extra_conf: slurm.conf lines of the test (HealthCheckProgram=..., Prolog=...)."""
        if self.run is None:
            raise SimClusterError("start the cluster before its Slurm")
        if self.rootfs_image is not None:
            raise SimClusterError("slurm: not with rootfs nodes (they share no slurm.conf)")
        if self.slurm is None:
            nodes = [
                SlurmNode(n.name, n.address, n.netns, self.node_env(n), self._own_identity(n))
                for n in self.nodes.values()
            ]
            slurm = SimSlurm(self.workdir, self.run, self.bridge, nodes, extra_conf)
            self._track(slurm.dir)
            self.slurm = slurm
            slurm.start()
        return self.slurm

    def slurm_env(self) -> dict[str, str]:
        """The environment a Slurm client (srun, salloc, scontrol, bringup --slurm) needs."""
        if self.slurm is None:
            raise SimClusterError("this cluster runs no Slurm: start_slurm() first")
        return self.slurm.env()

    def _install_dcgmi(self, node: SimNode) -> None:
        """The node's own `dcgmi` (bringup.sim.dcgm): DCGM's table for the GPUs it has."""
        from bringup.sim import dcgm

        state = nvml_state(node.fault)
        gpus = [g for g in state["gpus"] if not g.get("missing")]  # type: ignore[attr-defined]
        dcgm.install(node.bin_dir, len(gpus), str(state["driver_version"]))

    def _build_nvml(self) -> None:
        """The simulated libnvidia-ml.so.1, once for all nodes (each reads its own state)."""
        if self._nvml is False:
            return
        from bringup.sim.nvml import NvmlSimError, build_library

        self._track(self.workdir / "nvml")
        try:
            self.nvml_library = build_library(self.workdir / "nvml")
        except NvmlSimError as exc:
            if self._nvml:
                raise SimClusterError(f"simulated NVML: {exc}") from None
            self.nvml_why_not = str(exc)

    def _build_rootfs_image(self) -> None:
        reason = rootfs_available()
        if reason:
            raise SimClusterError(f"rootfs nodes: {reason}")
        try:
            self.rootfs_image = ensure_image(self._rootfs or Image())
        except RootfsError as exc:
            raise SimClusterError(f"rootfs nodes: {exc}") from None
        self._track(self.workdir / ".rootfs")

    def _node_root(self, node: SimNode) -> NodeRoot:
        assert self.rootfs_image is not None
        return NodeRoot(self.rootfs_image, self.workdir / ".rootfs" / node.name)

    def root(self, name: str) -> Path:
        """The node's own root filesystem as this machine sees it (rootfs mode), through
        its first process: write a file under it and the node has it in its overlay."""
        node = self.node(name)
        if self.rootfs_image is None:
            raise SimClusterError("the nodes share this machine's filesystem (no rootfs mode)")
        first = first_process(node.sshd.pid) if node.sshd is not None else None
        if first is None:
            raise SimClusterError(f"{name} is not running")
        return Path(f"/proc/{first}/root")

    def _track(self, *paths: Path) -> None:
        self._created.extend(paths)

    def _create_network(self) -> None:
        # One `ip -batch` for the root namespace and one per node: 64 nodes in about a second.
        root = [
            f"link add {self.bridge} type bridge",
            f"addr add {SUBNET}.{self.run}.{BRIDGE_HOST}/24 dev {self.bridge}",
            f"link set {self.bridge} up",
        ]
        for node in self.nodes.values():
            root += [
                f"netns add {node.netns}",
                f"link add {node.veth} type veth peer name eth0 netns {node.netns}",
                f"link set {node.veth} master {self.bridge}",
                f"link set {node.veth} up",
            ]
        run_setup(["ip", "-batch", "-"], "\n".join(root) + "\n")
        for node in self.nodes.values():
            inside = ["link set lo up", f"addr add {node.address}/24 dev eth0", "link set eth0 up"]
            run_setup(["ip", "-n", node.netns, "-batch", "-"], "\n".join(inside) + "\n")

    def _sshd_config(self, node: SimNode) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.node_env(node).items())
        return "\n".join(
            [
                f"# sshd of simulated node {node.name} (bringup.sim.cluster)",
                f"ListenAddress {node.address}:22",
                f"HostKey {node.host_key}",
                f"PidFile {node.dir / 'sshd.pid'}",
                # %u: only root has a key file, so another user cannot log in with root's key.
                f"AuthorizedKeysFile {node.dir}/authorized_keys_%u",
                "AllowUsers root",
                "PermitRootLogin prohibit-password",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "PermitUserEnvironment no",
                # The work directory is under /tmp (world-writable), which StrictModes refuses.
                "StrictModes no",
                "UseDNS no",
                "MaxStartups 200",
                "MaxSessions 64",
                "LogLevel VERBOSE",
                "Subsystem sftp internal-sftp",
                # The node's own environment (SetEnv is applied after sshd's default PATH).
                f"SetEnv {env}",
                "",
            ]
        )

    def node_env(self, node: SimNode) -> dict[str, str]:
        """What the node's sessions get (SSH's SetEnv, Slurm's TaskProlog): the node's own
        tools first on PATH, its own cache (the probe code, work directories: the nodes
        share this machine's disk, not their caches), and its own simulated NVML."""
        path = f"{node.bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        env = {**self._env, "PATH": path, "XDG_CACHE_HOME": str(node.cache_dir)}
        if self.nvml_library is not None:
            from bringup.sim.nvml import ENV_STATE

            env["LD_LIBRARY_PATH"] = str(self.nvml_library.parent)
            env[ENV_STATE] = str(node.nvml_state)
        return env

    def _spawn_sshd(self, node: SimNode) -> subprocess.Popen[bytes]:
        log = (node.dir / "sshd.log").open("ab")
        sshd = [SSHD, "-D", "-e", "-f", str(node.dir / "sshd_config")]
        argv = ["ip", "netns", "exec", node.netns, *self._own_identity(node), *sshd]
        if self.rootfs_image is not None:
            # Its own root: the node's folder (keys, sshd_config, tools) and the NVML
            # library are seen inside at the same paths.
            binds = [node.dir] + ([self.nvml_library.parent] if self.nvml_library else [])
            own_identity(node.dir, sim_number(node.name))  # writes its product_serial
            serial = node.dir / "product_serial"
            argv = self._node_root(node).command(node.netns, node.name, binds, sshd, serial)
        with log:
            return subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # a Ctrl-C of the test run reaches stop(), not sshd
                preexec_fn=unlimited_memlock,
            )

    def _own_identity(self, node: SimNode) -> list[str]:
        """What gives the node a machine id and system serial of its own (netns.own_identity)."""
        return own_identity(node.dir, sim_number(node.name))

    def _wait_for_sshd(self, node: SimNode) -> None:
        end = time.monotonic() + SSHD_READY_S
        while time.monotonic() < end:
            if node.sshd is not None and node.sshd.poll() is not None:
                break
            if banner(node.address, 1.0):
                return
            time.sleep(0.05)
        log = (node.dir / "sshd.log").read_text(errors="replace").strip().splitlines()
        last = log[-1] if log else "no output"
        raise SimClusterError(f"sshd of {node.name} did not start: {last}")

    # -- files for the controller

    def write_known_hosts(self) -> None:
        lines = [f"{node.address} {node.host_key_line}" for node in self.nodes.values()]
        self.known_hosts.write_text("\n".join(lines) + "\n")

    def write_inventory(
        self,
        path: Path | None = None,
        host_vars: Mapping[str, Mapping[str, str]] | None = None,
        names: Sequence[str] | None = None,
    ) -> Path:
        """An Ansible INI inventory of the nodes (default: hosts.ini in the work directory).

        host_vars adds or overrides variables of single hosts (a wrong key, another user).
        """
        target = path or self.inventory
        lines = [f"# {len(self.nodes)} simulated nodes (bringup.sim.cluster run {self.run})"]
        lines.append("[sim]")
        for name in names or self.names:
            node = self.node(name)
            values: dict[str, str] = {"ansible_host": node.address}
            if node_has_recording(node):
                values["bringup_replay"] = str(node.facts_file)
            values.update((host_vars or {}).get(name, {}))
            lines.append(name + "".join(f" {k}={shlex.quote(v)}" for k, v in values.items()))
        common = f"-o UserKnownHostsFile={self.known_hosts}"
        lines += [
            "",
            "[sim:vars]",
            "ansible_user=root",
            f"ansible_ssh_private_key_file={shlex.quote(str(self.key_file))}",
            f"ansible_ssh_common_args={shlex.quote(common)}",
            "ansible_python_interpreter=/usr/bin/python3",
            "",
        ]
        target.write_text("\n".join(lines))
        return target

    # -- faults

    def pids(self, name: str) -> list[int]:
        return netns_pids(self.node(name).netns)

    def stop_sshd(self, name: str) -> None:
        """Stop the node's sshd: new connections are refused (sessions running go on)."""
        node = self.node(name)
        if node.sshd is not None and node.sshd.poll() is None:
            node.sshd.terminate()
            node.sshd.wait()

    def start_sshd(self, name: str) -> None:
        node = self.node(name)
        self.stop_sshd(name)
        node.sshd = self._spawn_sshd(node)
        self._wait_for_sshd(node)

    def kill_node_processes(self, name: str) -> None:
        """SIGKILL every process of the node, sshd included: the node crashed."""
        node = self.node(name)
        # Again until none is left: sshd may fork for a connection arriving meanwhile.
        for _ in range(100):
            pids = self.pids(name)
            if not pids:
                break
            signal_all(pids, signal.SIGKILL)
            time.sleep(0.01)
        if node.sshd is not None:
            node.sshd.wait()

    def freeze(self, name: str) -> list[int]:
        """SIGSTOP every process of the node but its listening sshd: the node hangs silently.

        Its TCP connections stay open (the kernel still answers) while nothing is sent,
        as on a node stuck in the kernel; only the controller's deadline ends the wait.
        """
        node = self.node(name)
        listener = node.sshd.pid if node.sshd is not None else None
        stopped = [pid for pid in self.pids(name) if pid != listener]
        signal_all(stopped, signal.SIGSTOP)
        return stopped

    def thaw(self, name: str) -> None:
        signal_all(self.pids(name), signal.SIGCONT)

    def wait_for_process(self, name: str, text: str, timeout_s: float) -> int | None:
        """The pid of the first process of the node whose command line contains text."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            for pid in self.pids(name):
                if text in cmdline(pid):
                    return pid
            time.sleep(0.02)
        return None

    def install_tool(self, name: str, tool: str, script: str) -> Path:
        """Put an executable script named `tool` first on the node's PATH (its SSH sessions)."""
        path = self.node(name).bin_dir / tool
        path.write_text(script)
        path.chmod(0o755)
        return path

    def add_latency(self, name: str, delay_ms: float, loss_pct: float = 0.0) -> None:
        """tc netem on both ends of the node's link: +delay_ms each way, loss_pct dropped."""
        node = self.node(name)
        netem = ["netem", "delay", f"{delay_ms:g}ms"]
        if loss_pct:
            netem += ["loss", f"{loss_pct:g}%"]
        for prefix, dev in (([], node.veth), (["-n", node.netns], "eth0")):
            try:
                run_setup(["tc", *prefix, "qdisc", "replace", "dev", dev, "root", *netem])
            except SimClusterError as exc:
                if "unknown" in str(exc).lower():
                    raise SimClusterError(
                        "this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): "
                        "use add_loss() or limit_rate()"
                    ) from None
                raise

    def limit_rate(self, name: str, bits_per_s: int) -> None:
        """tc tbf on both ends of the node's link: a slow link (a degraded or shared uplink)."""
        node = self.node(name)
        tbf = ["tbf", "rate", f"{bits_per_s}bit", "burst", "16kb", "latency", "2s"]
        run_setup(["tc", "qdisc", "replace", "dev", node.veth, "root", *tbf])
        run_setup(["tc", "-n", node.netns, "qdisc", "replace", "dev", "eth0", "root", *tbf])

    def add_loss(self, name: str, loss_pct: float) -> None:
        """Drop loss_pct % of the node's packets, both ways (nftables in the node's namespace)."""
        if not 0 < loss_pct < 100:
            raise SimClusterError(f"loss_pct must be between 0 and 100, got {loss_pct:g}")
        drop = f"numgen random mod 100 < {loss_pct:g} drop;"
        ruleset = (
            "table inet bringup_sim {\n"
            f"  chain input {{ type filter hook input priority 0; {drop} }}\n"
            f"  chain output {{ type filter hook output priority 0; {drop} }}\n"
            "}\n"
        )
        run_setup(["ip", "netns", "exec", self.node(name).netns, "nft", "-f", "-"], ruleset)

    def clear_network_faults(self, name: str) -> None:
        """Remove latency, rate limits and loss from the node's link."""
        node = self.node(name)
        for argv in (
            ["tc", "qdisc", "del", "dev", node.veth, "root"],
            ["tc", "-n", node.netns, "qdisc", "del", "dev", "eth0", "root"],
            ["ip", "netns", "exec", node.netns, "nft", "delete", "table", "inet", "bringup_sim"],
        ):
            subprocess.run(argv, capture_output=True, check=False)

    def swap_host_key(self, name: str) -> None:
        """Give the node a new host key (restarting its sshd); known_hosts keeps the old one."""
        node = self.node(name)
        keygen(node.host_key, node.name)
        self.start_sshd(name)

    def trust_host_key(self, name: str) -> None:
        """Record the node's current host key in known_hosts (its new key was checked)."""
        node = self.node(name)
        node.host_key_line = node.host_key.with_name(node.host_key.name + ".pub").read_text()
        node.host_key_line = node.host_key_line.strip()
        self.write_known_hosts()

    def forget_host_key(self, name: str) -> None:
        """Remove the node from known_hosts: its key becomes unknown to the controller."""
        address = self.node(name).address
        kept = [
            line
            for line in self.known_hosts.read_text().splitlines()
            if line.split(" ", 1)[0] != address
        ]
        self.known_hosts.write_text("".join(line + "\n" for line in kept))

    def stranger_key(self) -> Path:
        """A key pair no node accepts (for the wrong-key test)."""
        path = self.workdir / "stranger_ed25519"
        if not path.exists():
            self._track(path, path.with_name(path.name + ".pub"))
            keygen(path, "stranger")
        return path


def node_has_recording(node: SimNode) -> bool:
    """True when some probe of the node is answered from its recording."""
    return bool(recorded_probes() - set(node.live))
