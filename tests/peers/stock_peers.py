"""Stock Apache RocketMQ as test peers: name servers and brokers of a fetched version (peers/fetch.sh puts the jars
in .peers/rocketmq-<version>/lib) run as real JVM processes, and small Java programs (tests/peers/java) play the
stock clients. A cluster is a context manager and stops every process it started, whatever happens."""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Iterable, Iterator, Optional

from remoting.blocking_client import BlockingRemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.namesrv_bodies import ClusterInfo
from remoting.remoting_command import RemotingCommand

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEERS_DIR = os.environ.get("RMQ_PEERS_DIR", os.path.join(ROOT, ".peers"))
JAVA_SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java")
VERSIONS = [v.strip() for v in open(os.path.join(ROOT, "peers", "versions")) if v.strip() and v[0] != "#"]
STOCK_4, STOCK_5 = VERSIONS[0], VERSIONS[-1]
CLUSTER = "StockCluster"

# The JVM options every stock RocketMQ line needs on Java 17: the 4.9 store unmaps files through DirectByteBuffer's
# cleaner, which Java 17 hides unless opened.
OPENS = ["--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
         "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED",
         "--add-opens=java.base/java.util=ALL-UNNAMED"]
# The tests' peers: a light JVM for 2 shared cores (small heap, the serial collector, C1 only: start-up is mostly
# class loading and interpretation), and no TLS context for the name server's and brokers' permissive TLS mode
# (building its self-signed certificate took 4-6 s of C1 code per process: a 5.5.0 cluster booted in 15-25 s with
# it, 5-7 s without; a 4.9.7 cluster 6.4 s and 2.7 s). Behaviour, not speed: benchmarks use STOCK_BROKER_JVM.
# A stock broker refuses every write while its store's partition is fuller than diskSpaceWarningLevelRatio (used
# = total - free blocks, UtilAll.getDiskPartitionSpaceUsedPercent; 0.90), and above diskSpaceCleanForciblyRatio
# (0.85) deletes every commitlog file but the newest, however young. 4.9 takes both from these properties, as
# RocketMQ's own integration tests set them; 5.x caps them at 0.90 and 0.85 (StockCluster checks before a start).
DISK_RATIOS = ["-Drocketmq.broker.diskSpaceWarningLevelRatio=0.99",
               "-Drocketmq.broker.diskSpaceCleanForciblyRatio=0.99"]
JVM_FLAGS = ["-Xms64m", "-Xmx512m", "-XX:MaxDirectMemorySize=256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-XX:-UsePerfData", "-Djava.net.preferIPv4Stack=true", "-Dtls.server.mode=disabled", *DISK_RATIOS,
             *OPENS]
# A stock broker as RocketMQ's own launcher starts it (distribution/bin/runbroker.sh, its Java 11+ branch: the
# server JIT, G1 with its settings, an 8 GiB heap touched at start, 15 GiB of direct memory): what side-by-side
# benchmarks measure ours against.
STOCK_BROKER_JVM = ["-server", "-Xms8g", "-Xmx8g", "-Xmn4g", "-XX:+UseG1GC", "-XX:G1HeapRegionSize=16m",
                    "-XX:G1ReservePercent=25", "-XX:InitiatingHeapOccupancyPercent=30",
                    "-XX:SoftRefLRUPolicyMSPerMB=0", "-XX:-OmitStackTraceInFastThrow", "-XX:+AlwaysPreTouch",
                    "-XX:MaxDirectMemorySize=15g", "-XX:-UseLargePages", "-Djava.net.preferIPv4Stack=true", *OPENS]
START_TIMEOUT = float(os.environ.get("RMQ_PEERS_START_TIMEOUT", "180"))  # 5.x brokers boot in 20-70 s here

# Small store files (the defaults are 1 GiB of CommitLog and 6 MB of ConsumeQueue per file), SQL92 filtering on,
# the 5.x timer wheel (hundreds of MB of mapped files) off. Transactions checked within the tests' time: a half
# unanswered 3 s is checked, a check round every 10 s (the defaults: 6 s, and 60 s on 4.9, 30 s on 5.x), up to 20
# times before the broker gives up on it (15): every round copies each unanswered half, so a half nobody answers
# (a killed query's, when no query of its group runs) costs its broker 20 copies, not hundreds. Rounds every 2 s
# kept a 5.5.0 broker's check thread busy a whole core once its half queue held 18,000 halves, all ended.
BROKER_DEFAULTS = {
    "brokerClusterName": CLUSTER,
    "brokerId": "0",
    "brokerIP1": "127.0.0.1",
    "mappedFileSizeCommitLog": str(16 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": str(20 * 6000),
    "enablePropertyFilter": "true",
    "autoCreateTopicEnable": "true",
    "autoCreateSubscriptionGroup": "true",
    "flushDiskType": "ASYNC_FLUSH",
    "timerWheelEnable": "false",
    "transactionTimeOut": "3000",
    "transactionCheckInterval": "10000",
    "transactionCheckMax": "20",
    # 5.x batches its op messages (which halves are ended) in TransactionalOpBatchService. In 5.5.0 (read in its
    # bytecode, measured) that thread spins once a half queue's op context has been idle longer than
    # transactionOpBatchInterval: it takes the context's last write as the next wake-up, which is then in the past
    # (60-90% of a core per broker, from the first END_TRANSACTION until the broker stops, whatever the producer).
    # An op message per END (max size 1) and a day's interval keep the op queue current and the thread asleep.
    "transactionOpMsgMaxSize": "1",
    "transactionOpBatchInterval": "86400000",
}

_LOGBACK = """<configuration>
  <appender name="FILE" class="{p}ch.qos.logback.core.FileAppender">
    <file>${{user.home}}/{name}.log</file>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5level %logger{{0}} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""

_live: set[subprocess.Popen] = set()


# A SIGTERM to the test run (CI's timeout, `timeout`) would skip atexit and leave the JVMs running: exit instead.
if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_live):
        _kill_group(proc, signal.SIGKILL)


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class PeerMissing(AssertionError):
    pass


def lib(version: str) -> str:
    """The folder of a fetched version's jars; a clear failure (never a skip) when it is not there."""
    path = os.path.join(PEERS_DIR, f"rocketmq-{version}", "lib")
    if not os.path.exists(os.path.join(path, ".complete")):
        raise PeerMissing(f"stock Apache RocketMQ {version} is not fetched into {path}: run `make peers` "
                          "(peers/fetch.sh, Maven from Maven Central)")
    return path


def classpath(version: str, *extra: str) -> str:
    return os.pathsep.join([*extra, os.path.join(lib(version), "*")])


def _logback_home(version: str, name: str) -> tuple[list[str], str]:
    """JVM properties giving `name`'s logs a small config of ours (one INFO file) and its ROCKETMQ_HOME.
    4.9 reads $ROCKETMQ_HOME/conf/logback_<name>.xml; 5.x a shaded logback's rmq.logback.configurationFile."""
    home = os.path.join(PEERS_DIR, f"rocketmq-{version}", "home")
    conf = os.path.join(home, "conf")
    os.makedirs(conf, exist_ok=True)
    shaded = "" if version.startswith("4.") else "org.apache.rocketmq.logging."
    path = os.path.join(conf, f"logback_{name}.xml")
    text = _LOGBACK.format(p=shaded, name=name)
    if not os.path.exists(path) or open(path).read() != text:
        write_atomically(path, text)
    return [f"-Drocketmq.home.dir={home}", f"-Drmq.logback.configurationFile={path}"], home


def write_atomically(path: str, text: str) -> None:
    """Write a file through a temporary name of this process and thread (test workers and threads write the same
    shared config files at once)."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


_taken: set[int] = set()


def _free_port(spread: Iterable[int] = (0,)) -> int:
    """A port p with p+d free for every d in `spread` (a broker also listens on p-2 and p+1), below the ephemeral
    range (a JVM booting for a minute must not find its port taken by some client's outgoing connection) and never
    handed out twice by this process."""
    rng = random.Random()
    for _ in range(500):
        port = rng.randrange(12000, 32000)
        ports = [port + d for d in spread]
        if not _taken.intersection(ports) and all(_bindable(p) for p in ports):
            _taken.update(ports)
            return port
    raise AssertionError("no free port found")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def _tail(path: str, n: int = 30) -> str:
    try:
        with open(path, "rb") as f:
            return b"".join(f.readlines()[-n:]).decode("utf-8", "replace")
    except OSError:
        return "(no log)"


class StockCluster:
    """A stock name server and brokers of `version`: each broker with its own store and broker.conf under `root`
    (`conf` adds or overrides broker.conf lines for all of them; `broker_jvm` the brokers' JVM options, the tests'
    light JVM_FLAGS unless given). The same surface as tests' WireCluster: .namesrv, .addresses, .start(name),
    .kill(name), .stop(), .store(name)."""

    def __init__(self, version: str, root, brokers=("broker-a", "broker-b"), conf: Optional[dict] = None,
                 broker_jvm: Optional[list[str]] = None, slaves: Optional[dict[str, str]] = None,
                 controller: Optional[dict[str, int]] = None):
        """slaves: {broker name: its master's brokerRole, ASYNC_MASTER or SYNC_MASTER}: that broker name is a
        group of a master (the node named as the broker) and a slave, brokerId 1, node slave_of(name), both with
        slaveReadEnable=true (a slave refuses pulls without it).
        controller: {broker name: its number of nodes} (5.x): that broker name is a group in controller mode
        (enableControllerMode), nodes the broker's name and replica_of(name, 1), ...; the name server runs the
        controller (enableControllerInNamesrv), which assigns the nodes' brokerIds and elects the group's master
        (master(name) names the node) and a new one when it dies."""
        self.version, self.root = version, str(root)
        self.broker_jvm = JVM_FLAGS if broker_jvm is None else broker_jvm
        self.slaves = dict(slaves or {})
        self.controller = dict(controller or {})
        if self.controller and version.startswith("4."):
            raise ValueError(f"controller: RocketMQ {version} has no controller mode (5.x has)")
        for name, count in self.controller.items():
            if name not in brokers or name in self.slaves:
                raise ValueError(f"controller: {name!r} is not one of the brokers {list(brokers)} without slaves")
            if count < 2:
                raise ValueError(f"controller: {name!r} needs 2 nodes or more, not {count}")
        for name, role in self.slaves.items():
            if name not in brokers:
                raise ValueError(f"slaves: {name!r} is not one of the brokers {list(brokers)}")
            if role not in ("ASYNC_MASTER", "SYNC_MASTER"):
                raise ValueError(f"slaves: the master role of {name!r} must be ASYNC_MASTER or SYNC_MASTER, not "
                                 f"{role!r}")
        # node name -> (brokerName, brokerId)
        self.nodes: dict[str, tuple[str, int]] = {name: (name, 0) for name in brokers}
        self.nodes.update({slave_of(name): (name, 1) for name in brokers if name in self.slaves})
        # -1: the controller assigns the brokerId (the route lists the master as 0, the others by theirs)
        self.nodes.update({replica_of(name, i): (name, -1) for name, n in self.controller.items() for i in range(n)})
        self.names = list(self.nodes)
        self.conf = {**BROKER_DEFAULTS, **(conf or {})}
        self.procs: dict[str, subprocess.Popen] = {}
        self.addresses: dict[str, str] = {}
        self.namesrv = ""
        self.controller_addr = ""
        self.start_seconds: dict[str, float] = {}
        self.booted_at = 0.0  # time.time() when every node was up
        os.makedirs(self.root, exist_ok=True)

    def disk_limit(self) -> float:
        """The partition use above which this cluster's brokers refuse every write (diskSpaceWarningLevelRatio)."""
        return 0.99 if self.version.startswith("4.") and DISK_RATIOS[0] in self.broker_jvm else 0.90

    def _check_disk(self) -> None:
        st = os.statvfs(self.root)
        used = 1 - st.f_bfree / st.f_blocks
        if used > self.disk_limit():
            raise RuntimeError(f"the disk holding {self.root} is {used:.1%} used: a stock {self.version} broker "
                               f"refuses every write above {self.disk_limit():.0%} (diskSpaceWarningLevelRatio); "
                               f"free some space")

    def __enter__(self) -> "StockCluster":
        try:
            lib(self.version)
            self._check_disk()
            self.start_namesrv()
            procs = {name: self._spawn_broker(name) for name in self.names}  # boot together: 2 cores, slow JVMs
            for name in self.names:
                self._wait_registered(name, procs[name])
            for name in self.controller:
                self._wait(lambda n=name: self.master(n) is not None, procs[name], f"the master of {name}")
            self.booted_at = time.time()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def store(self, name: str) -> str:
        return os.path.join(self.root, name, "store")

    def log(self, name: str) -> str:
        return os.path.join(self.root, name, f"{name}.out")

    def _java(self, name: str, main: str, args: list[str], kind: str, jvm: list[str] = JVM_FLAGS) -> subprocess.Popen:
        props, _ = _logback_home(self.version, kind)
        node = os.path.join(self.root, name)
        tmp = os.path.join(node, "tmp")  # 5.x's broker unpacks RocksDB's 13 MB library there at every start
        os.makedirs(tmp, exist_ok=True)
        out = open(self.log(name), "ab")
        try:
            # user.home: where 4.9's name server keeps kvConfig.json and both lines put their other logs
            proc = subprocess.Popen(["java", *jvm, f"-Duser.home={node}", f"-Djava.io.tmpdir={tmp}", *props,
                                     "-cp", classpath(self.version),
                                     main, *args], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, cwd=node)
        finally:
            out.close()
        _live.add(proc)
        self.procs[name] = proc
        return proc

    def start_namesrv(self) -> str:
        port = _free_port()
        conf = os.path.join(self.root, "namesrv.conf")
        lines = {"listenPort": port}
        if self.controller:
            # a controller of one node (a DLedger group of one) on its own port, its log in small files
            cport = _free_port()
            self.controller_addr = f"127.0.0.1:{cport}"
            lines.update({"enableControllerInNamesrv": "true", "controllerDLegerGroup": "group1",
                          "controllerDLegerPeers": f"n0-{self.controller_addr}", "controllerDLegerSelfId": "n0",
                          "controllerStorePath": os.path.join(self.root, "controller"),
                          "mappedFileSize": str(4 * 1024 * 1024)})
        with open(conf, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in lines.items())
        t0 = time.monotonic()
        proc = self._java("namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup", ["-c", conf], "namesrv")
        self.namesrv = f"127.0.0.1:{port}"
        self._wait(lambda: self._cluster_info() is not None, proc, "namesrv")
        self.start_seconds["namesrv"] = time.monotonic() - t0
        return self.namesrv

    def _spawn_broker(self, name: str) -> subprocess.Popen:
        port = int(self.addresses[name].rsplit(":", 1)[1]) if name in self.addresses else _free_port((-2, 0, 1))
        self.addresses[name] = f"127.0.0.1:{port}"
        store = self.store(name)
        broker_name, broker_id = self.nodes.get(name, (name, 0))
        # haListenPort: 4.9 always takes listenPort + 1 (reserved by _free_port's spread), 5.x reads it
        conf = {**self.conf, "brokerName": broker_name, "brokerId": str(broker_id), "namesrvAddr": self.namesrv,
                "listenPort": str(port), "haListenPort": str(port + 1),
                "storePathRootDir": store, "storePathCommitLog": os.path.join(store, "commitlog")}
        if broker_name in self.slaves:
            conf["brokerRole"] = "SLAVE" if broker_id else self.slaves[broker_name]
            conf["slaveReadEnable"] = "true"
            conf["brokerIP2"] = "127.0.0.1"  # the HA address the master registers (4.9's default: a host address)
        if broker_name in self.controller:
            # every node starts as a slave with no id; a send is acknowledged once every node of the syncStateSet
            # (the nodes in sync, from which the controller elects) holds it
            conf.update({"brokerId": "-1", "brokerRole": "SLAVE", "enableControllerMode": "true",
                         "controllerAddr": self.controller_addr, "allAckInSyncStateSet": "true",
                         "slaveReadEnable": "true", "brokerIP2": "127.0.0.1"})
        path = os.path.join(self.root, f"{name}.conf")
        with open(path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in conf.items())
        self.start_seconds[name] = time.monotonic()
        return self._java(name, "org.apache.rocketmq.broker.BrokerStartup", ["-c", path], "broker", self.broker_jvm)

    def start(self, name: str, wait: bool = True) -> str:
        """Start (or start again, on its former address and store) the broker `name`; returns when the name server
        lists it (at once with wait=False: ensure_running then takes it as running)."""
        proc = self._spawn_broker(name)
        if wait:
            self._wait_registered(name, proc)
        return self.addresses[name]

    def ensure_running(self, name: str) -> None:
        """Start `name` again if a test left it stopped (the cluster is shared by the session's modules)."""
        proc = self.procs.get(name)
        if proc is None or proc.poll() is not None:
            self.procs.pop(name, None)
            self.start(name)

    def _wait_registered(self, name: str, proc: subprocess.Popen) -> None:
        addr = self.addresses[name]
        broker_name, broker_id = self.nodes.get(name, (name, 0))

        def registered() -> bool:
            info = self._cluster_info()
            addrs = info.broker_addr_table[broker_name].broker_addrs if info and broker_name in \
                info.broker_addr_table else {}
            return addr in addrs.values() if broker_id == -1 else addrs.get(broker_id) == addr
        self._wait(registered, proc, name)
        self.start_seconds[name] = time.monotonic() - self.start_seconds[name]

    def _wait(self, check, proc: subprocess.Popen, name: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"stock {name} ({self.version}) exited with {proc.returncode}:\n"
                                     f"{_tail(self.log(name))}")
            try:
                if check():
                    return
            except (OSError, TimeoutError):
                pass
            time.sleep(0.3)
        raise AssertionError(f"stock {name} ({self.version}) not ready within {START_TIMEOUT} s:\n"
                             f"{_tail(self.log(name))}")

    def _cluster_info(self) -> Optional[ClusterInfo]:
        with BlockingRemotingClient(self.namesrv, connect_timeout=2) as client:
            answer = client.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3)
        return ClusterInfo.decode(answer.body) if answer.code == ResponseCode.SUCCESS else None

    def master(self, broker_name: str) -> Optional[str]:
        """The node the name server lists as broker_name's master (brokerId 0), None while it lists none."""
        info = self._cluster_info()
        data = info.broker_addr_table.get(broker_name) if info else None
        addr = data.broker_addrs.get(0) if data else None
        return next((n for n, a in self.addresses.items() if a == addr and self.nodes[n][0] == broker_name), None)

    def replica_info(self, broker_name: str) -> tuple[Optional[str], set[int]]:
        """What the controller says of a group in controller mode: its master's address (None while it has
        none) and its syncStateSet, the brokerIds in sync with the master (CONTROLLER_GET_REPLICA_INFO)."""
        with BlockingRemotingClient(self.controller_addr, connect_timeout=2) as client:
            answer = client.invoke(RemotingCommand.request(RequestCode.CONTROLLER_GET_REPLICA_INFO,
                                                           {"brokerName": broker_name}), 3)
        if answer.code != ResponseCode.SUCCESS:
            raise AssertionError(f"replica info of {broker_name} from the controller: {answer.code} {answer.remark}")
        in_sync = json.loads(answer.body or b"{}").get("syncStateSet") or []
        return answer.ext_fields.get("masterAddress") or None, {int(i) for i in in_sync}

    def kill(self, name: str, sig: int = signal.SIGKILL, timeout: float = 30) -> None:
        """Signal a node's process group and wait for it (SIGTERM lets the broker flush and unregister; a SIGKILL
        follows after `timeout`)."""
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        if proc.poll() is None:
            _kill_group(proc, sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc, signal.SIGKILL)
                proc.wait(10)
        _live.discard(proc)

    def stop(self, graceful: bool = False) -> None:
        sig = signal.SIGTERM if graceful else signal.SIGKILL
        for name in [n for n in self.procs if n != "namesrv"] + ["namesrv"]:
            self.kill(name, sig)

    def java(self) -> "StockClients":
        return StockClients(self.version, self.namesrv, self.root)


def slave_of(broker_name: str) -> str:
    """The node name of a broker name's slave in a StockCluster."""
    return f"{broker_name}-slave"


def replica_of(broker_name: str, i: int) -> str:
    """The node name of a controller-mode group's i-th node in a StockCluster (the first is named as the group)."""
    return broker_name if i == 0 else f"{broker_name}-n{i}"


class StockClients:
    """The stock Java client programs of tests/peers/java, compiled once per version and source hash into
    .peers/classes/<version>-<hash>, run as child processes with timeouts."""

    def __init__(self, version: str, namesrv: str, root):
        self.version, self.namesrv = version, namesrv
        self.home = os.path.join(str(root), "java-clients")
        os.makedirs(self.home, exist_ok=True)
        self.classes = compiled(version)

    def command(self, main: str, *args: str) -> list[str]:
        props, _ = _logback_home(self.version, "client")
        # the 4.9 client logs through its own logger to ${user.home}/logs; 5.x through the shaded logback
        return ["java", *JVM_FLAGS, f"-Duser.home={self.home}", *props, "-Drocketmq.client.logLevel=WARN",
                "-cp", classpath(self.version, self.classes), main, *args]

    def run(self, main: str, *args: str, input_lines: Iterable[dict] = (), timeout: float = 120) -> list[dict]:
        """Run a program to its end; its stdout's JSON lines. A non-zero exit or a timeout fails with its output."""
        stdin = "".join(json.dumps(x) + "\n" for x in input_lines)
        try:
            done = subprocess.run(self.command(main, *args), input=stdin, capture_output=True, text=True,
                                  timeout=timeout, start_new_session=True)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"{main} {' '.join(args)} did not finish within {timeout} s; stderr:\n"
                                 f"{_decoded(e.stderr)[-3000:]}") from None
        if done.returncode != 0:
            raise AssertionError(f"{main} {' '.join(args)} exited with {done.returncode}:\n{done.stderr[-3000:]}")
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    def start(self, main: str, *args: str, env: Optional[dict[str, str]] = None) -> subprocess.Popen:
        """Start a program in the background (stdin and stdout pipes; `env` added to its environment); stop it
        with stop()."""
        proc = subprocess.Popen(self.command(main, *args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                env={**os.environ, **(env or {})})
        _live.add(proc)
        return proc

    @staticmethod
    def stop(proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            _kill_group(proc, signal.SIGKILL)
            proc.wait(10)
        _live.discard(proc)

    def produce(self, messages: Iterable[dict], group: str = "stock-producer", timeout: float = 120) -> list[dict]:
        """Send with DefaultMQProducer: each item a message ({"topic", "tags", "keys", "props", "body"}) for
        send(Message) or {"batch": [messages]} for send(Collection<Message>); the SendResults, in order."""
        items = list(messages)
        results = self.run("StockProducer", self.namesrv, group, input_lines=items, timeout=timeout)
        errors = [r for r in results if "error" in r]
        assert not errors and len(results) == len(items), f"stock producer: {errors[:3] or results[-3:]}"
        return results

    def consume(self, topic: str, count: int, group: str, selector: str = "tag", expression: str = "*",
                timeout: float = 60, from_where: str = "first") -> list[dict]:
        """Receive with a DefaultMQPushConsumer until `count` messages came or `timeout` s passed; the messages."""
        return self.consume_many(topic, [(group, selector, expression, count)], timeout, from_where)[group]

    def consume_many(self, topic: str, specs: list[tuple[str, str, str, int]], timeout: float = 60,
                     from_where: str = "first") -> dict[str, list[dict]]:
        """One DefaultMQPushConsumer per (group, selector "tag" or "sql", expression, count), all in one JVM, until
        each has its count or `timeout` s passed; {group: messages}."""
        out = self.run("StockPushConsumer", self.namesrv, topic, str(int(timeout)),
                       *(f"{g}:{sel}:{n}:{from_where}:{expr}" for g, sel, expr, n in specs), timeout=timeout + 90)
        assert out and "done" in out[-1], f"stock consumer ended without its summary: {out[-3:]}"
        got: dict[str, list[dict]] = {g: [] for g, _, _, _ in specs}
        for m in out[:-1]:
            got[m["group"]].append(m)
        return got

    def admin(self, *args: str, timeout: float = 90) -> list[dict]:
        return self.run("StockAdmin", self.namesrv, *args, timeout=timeout)

    def create_topic(self, topic: str, queues: int, cluster: str = CLUSTER) -> list[dict]:
        """`topic` (or several, comma-separated: one JVM for them all) on every master of `cluster`."""
        return self.admin("createTopic", cluster, topic, str(queues))

    def consume_stats(self, group: str, topic: Optional[str] = None) -> list[dict]:
        return self.admin("consumeStats", group, *([topic] if topic else []))


def _decoded(data) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def _sources(folder: str) -> Iterator[str]:
    for name in sorted(os.listdir(folder)):
        if name.endswith(".java"):
            yield os.path.join(folder, name)


def compiled(version: str, folder: str = JAVA_SOURCES) -> str:
    """javac the Java programs of `folder` (the client programs of tests/peers/java by default) against `version`'s
    jars once: the classes are cached in .peers/classes keyed by the version and the sources' hash (javac takes
    5-30 s here)."""
    sources = list(_sources(folder))
    digest = hashlib.sha256(b"".join(open(p, "rb").read() for p in sources)).hexdigest()[:16]
    out = os.path.join(PEERS_DIR, "classes", f"{version}-{digest}")
    if os.path.exists(os.path.join(out, ".complete")):
        return out
    tmp = f"{out}.{os.getpid()}.tmp"
    done = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-d", tmp, "-cp", classpath(version), *sources],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise AssertionError(f"javac of {folder} against RocketMQ {version} failed:\n{done.stderr[-3000:]}")
    open(os.path.join(tmp, ".complete"), "w").close()
    try:
        os.rename(tmp, out)
    except OSError:  # another process compiled the same sources first
        subprocess.run(["rm", "-rf", tmp])
    return out
