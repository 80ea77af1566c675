//! A leaf cluster as a docker-compose project: the compose files in `deploy/`, driven through
//! the `docker` and `docker-compose` command-line tools (no Docker API client), so what the
//! tests exercise is exactly what an operator runs.
//!
//! Each [`Compose`] is its own project (its own containers, network and named volumes) with
//! free host ports and fresh secrets; dropping it runs `down -v`, which removes all of them.
//! The nodes speak TLS with the certificates the compose files' `certs` service makes: host
//! clients use `https://127.0.0.1:<port>` and the CA copied out of a node container
//! ([`Compose::ca`]); the CLI inside a container finds its URL and CA in the container's
//! environment (`LEAF_URL`, `LEAF_CA`).
//! Container faults map to Docker verbs: `docker kill` (SIGKILL) and `docker start`,
//! `docker stop` (SIGTERM), `docker pause`/`unpause` (cgroup freezer) and
//! `docker network disconnect`/`connect` (the node loses every link, to peers and clients).
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::cluster::{free_port, SECRET, TOKEN};

/// The repository's `deploy/` directory.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("deploy")
}

/// The compose file of an `n`-node cluster in `deploy/`, if there is one.
pub fn compose_file(n: u64) -> Option<PathBuf> {
    match n {
        3 => Some(deploy_dir().join("docker-compose.yml")),
        5 => Some(deploy_dir().join("docker-compose.5.yml")),
        _ => None,
    }
}

/// Why Docker cannot be used here, or `None` when the engine and docker-compose both answer.
pub fn unavailable() -> Option<String> {
    match Command::new("docker").args(["info", "--format", "{{.ServerVersion}}"]).output() {
        Err(e) => return Some(format!("docker is not installed ({e})")),
        Ok(o) if !o.status.success() => {
            return Some(format!("the Docker engine is not reachable: {}", String::from_utf8_lossy(&o.stderr).trim()))
        }
        Ok(_) => {}
    }
    match Command::new("docker-compose").arg("version").output() {
        Err(e) => Some(format!("docker-compose is not installed ({e})")),
        Ok(o) if !o.status.success() => Some("docker-compose does not run".to_string()),
        Ok(_) => None,
    }
}

/// Builds the image with `deploy/build-image.sh` (static binary, FROM scratch).
///
/// The script runs without the variables cargo sets for a test or build-script process
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, ...): build scripts such as ring's rerun when those
/// change, so inherited from a test they made the static build start over from ring up
/// (minutes) even when the same build had just been made from a shell, or by CI beforehand.
pub fn build_image(image: &str) -> anyhow::Result<()> {
    let script = deploy_dir().join("build-image.sh");
    let mut cmd = Command::new(&script);
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        let from_cargo = ["CARGO_MANIFEST_", "CARGO_PKG_", "CARGO_BIN_", "CARGO_CRATE_", "CARGO_PRIMARY_PACKAGE"]
            .iter()
            .any(|p| k.starts_with(p))
            || k == "CARGO_TARGET_TMPDIR"
            || k == "OUT_DIR";
        if from_cargo {
            cmd.env_remove(&key);
        }
    }
    let status = cmd.arg(image).status().with_context(|| format!("run {}", script.display()))?;
    if !status.success() {
        bail!("{} failed: {status}", script.display());
    }
    Ok(())
}

/// Whether `image` exists in the local engine.
pub fn image_exists(image: &str) -> bool {
    Command::new("docker").args(["image", "inspect", image]).output().is_ok_and(|o| o.status.success())
}

/// The program and arguments of `cmd`, without its environment (which holds the secrets).
fn shown(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs a command; returns its stdout, or an error with its stderr.
fn run(cmd: &mut Command) -> anyhow::Result<String> {
    let out: Output = cmd.output().with_context(|| format!("run `{}`", shown(cmd)))?;
    if !out.status.success() {
        bail!("`{}` failed ({}): {}", shown(cmd), out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// What `docker inspect` says of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainerState {
    pub running: bool,
    /// Frozen by `docker pause`.
    pub paused: bool,
    /// Attached to the cluster network.
    pub attached: bool,
}

/// A container's health as its healthcheck (`leaf health`) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerHealth {
    Starting,
    Healthy,
    Unhealthy,
    /// The container has no healthcheck.
    None,
    /// A status this harness does not know, as Docker printed it.
    Other(String),
}

impl ContainerHealth {
    fn parse(status: &str) -> ContainerHealth {
        match status {
            "starting" => ContainerHealth::Starting,
            "healthy" => ContainerHealth::Healthy,
            "unhealthy" => ContainerHealth::Unhealthy,
            "none" => ContainerHealth::None,
            other => ContainerHealth::Other(other.to_string()),
        }
    }
}

/// One compose project of `nodes` services `leaf1`..`leafN`. Methods name a service by its
/// number `i` (`leaf<i>`), which is also its node ID unless `LEAF<i>_NODE_ID` says otherwise.
pub struct Compose {
    project: String,
    files: Vec<PathBuf>,
    image: String,
    nodes: u64,
    ports: BTreeMap<u64, u16>,
    /// Extra variables for the compose files (`LEAF2_NODE_ID=6`).
    env: BTreeMap<String, String>,
    /// Container IDs by service, filled by [`Compose::up`] and [`Compose::up_only`].
    containers: BTreeMap<u64, String>,
    /// An empty file passed as `--env-file`, so an operator's `deploy/.env` (secrets,
    /// `LEAF2_NODE_ID=6`, ...) never leaks into this project; everything it needs is set here.
    env_file: tempfile::NamedTempFile,
    /// Holds `ca.pem`, the project's CA certificate, once the first node container is up.
    ca_dir: tempfile::TempDir,
    down: bool,
}

impl Compose {
    /// A project named `project` (lowercase letters and digits) from `files`, with a free
    /// host port per node. Nothing runs until [`Compose::up`].
    pub fn new(project: &str, files: Vec<PathBuf>, nodes: u64, image: &str) -> anyhow::Result<Compose> {
        if project.is_empty() || !project.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
            bail!("compose project name {project:?} must be lowercase letters and digits");
        }
        let ports = (1..=nodes).map(|id| (id, free_port())).collect();
        Ok(Compose {
            project: project.to_string(),
            files,
            image: image.to_string(),
            nodes,
            ports,
            env: BTreeMap::new(),
            containers: BTreeMap::new(),
            env_file: tempfile::NamedTempFile::new().context("create an empty env file")?,
            ca_dir: tempfile::tempdir().context("create a directory for the CA")?,
            down: false,
        })
    }

    /// The project name (containers, network and volumes are labelled with it).
    pub fn project(&self) -> &str {
        &self.project
    }

    /// `docker-compose -p PROJECT -f FILE...` with the environment the compose files read:
    /// secrets (the tests' own), image and host ports.
    fn compose(&self) -> Command {
        let mut cmd = Command::new("docker-compose");
        cmd.args(["--ansi", "never", "--env-file"]).arg(self.env_file.path()).arg("-p").arg(&self.project);
        for f in &self.files {
            cmd.arg("-f").arg(f);
        }
        cmd.env("LEAF_CLUSTER_SECRET", SECRET).env("LEAF_ADMIN_TOKEN", TOKEN).env("LEAF_IMAGE", &self.image);
        cmd.env("LEAF_PUBLISH_ADDR", "127.0.0.1");
        for (id, port) in &self.ports {
            cmd.env(format!("LEAF{id}_PORT"), port.to_string());
        }
        cmd.envs(&self.env);
        cmd
    }

    /// Gives service `i` (one an override file declares beyond the first N, a spare) a free
    /// host port, passed as `LEAF<i>_PORT` to later commands.
    pub fn reserve_port(&mut self, service: u64) {
        self.ports.entry(service).or_insert_with(free_port);
    }

    /// Sets a variable the compose files read, for later commands (`LEAF2_NODE_ID`, `6`).
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.insert(key.to_string(), value.to_string());
    }

    /// `docker-compose up -d` of every service, then records each one's container.
    pub fn up(&mut self) -> anyhow::Result<()> {
        let all: Vec<u64> = (1..=self.nodes).collect();
        self.up_only(&all)
    }

    /// `docker-compose up -d leaf<i>...` of these services only (and, first, the one-shot
    /// `certs` service they depend on). The first time, copies the CA certificate out of a
    /// node container (see [`Compose::ca`]).
    pub fn up_only(&mut self, services: &[u64]) -> anyhow::Result<()> {
        let names: Vec<String> = services.iter().map(|i| format!("leaf{i}")).collect();
        run(self.compose().args(["up", "-d", "--no-build"]).args(&names))?;
        for (&i, name) in services.iter().zip(&names) {
            let cid = run(self.compose().args(["ps", "-q", name]))?;
            if cid.is_empty() {
                bail!("no container for service {name}");
            }
            self.containers.insert(i, cid);
        }
        let ca = self.ca_dir.path().join("ca.pem");
        if !ca.exists() {
            if let Some(cid) = services.first().and_then(|i| self.containers.get(i)) {
                run(Command::new("docker").arg("cp").arg(format!("{cid}:/tls/ca.pem")).arg(&ca))
                    .context("copy the CA certificate out of a node container")?;
            }
        }
        Ok(())
    }

    /// `docker-compose exec -T leaf<i> ARGS...`: runs the binary inside the container, with
    /// the container's environment (its admin token). Returns stdout.
    pub fn exec(&self, service: u64, args: &[&str]) -> anyhow::Result<String> {
        run(self.compose().args(["exec", "-T", &format!("leaf{service}")]).args(args))
    }

    /// Removes the service's container and its named volume: a node lost with its data.
    pub fn destroy(&mut self, service: u64) -> anyhow::Result<()> {
        run(self.compose().args(["rm", "-s", "-f", &format!("leaf{service}")]))?;
        self.containers.remove(&service);
        run(Command::new("docker").args(["volume", "rm", &format!("{}_leaf{service}-data", self.project)])).map(drop)
    }

    /// Node IDs 1..=N.
    pub fn ids(&self) -> Vec<u64> {
        (1..=self.nodes).collect()
    }

    /// Base URL of node `id`'s published port (HTTPS: its certificate names 127.0.0.1).
    pub fn url(&self, id: u64) -> String {
        format!("https://127.0.0.1:{}", self.ports.get(&id).copied().unwrap_or(0))
    }

    /// The CA certificate of the project's nodes, copied out of a node container by the first
    /// [`Compose::up_only`] (`None` before).
    pub fn ca(&self) -> Option<PathBuf> {
        Some(self.ca_dir.path().join("ca.pem")).filter(|p| p.exists())
    }

    /// The mounts of node `id`'s container: (path in the container, writable).
    pub fn mounts(&self, id: u64) -> anyhow::Result<Vec<(String, bool)>> {
        let out = self.docker(&["inspect", "-f", "{{range .Mounts}}{{.Destination}} {{.RW}}{{println}}{{end}}"], id)?;
        let mut mounts = Vec::new();
        for line in out.lines().filter(|l| !l.trim().is_empty()) {
            match line.trim().split_once(' ') {
                Some((path, rw)) => mounts.push((path.to_string(), rw == "true")),
                None => bail!("unexpected docker inspect output {line:?}"),
            }
        }
        Ok(mounts)
    }

    /// The file names in directory `dir` of node `id`'s container (`docker cp` to a tar
    /// stream: the image has no `ls`).
    pub fn files(&self, id: u64, dir: &str) -> anyhow::Result<Vec<String>> {
        let cid = self.container(id)?;
        let tar = Command::new("docker").args(["cp", &format!("{cid}:{dir}"), "-"]).output().context("docker cp")?;
        if !tar.status.success() {
            bail!("docker cp {dir} failed: {}", String::from_utf8_lossy(&tar.stderr).trim());
        }
        let mut list = Command::new("tar")
            .arg("-t")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .context("run tar")?;
        if let Some(mut stdin) = list.stdin.take() {
            std::io::Write::write_all(&mut stdin, &tar.stdout).context("feed tar")?;
        }
        let out = list.wait_with_output().context("tar -t")?;
        if !out.status.success() {
            bail!("tar -t failed");
        }
        let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('/').map(|(_, name)| name.to_string()))
            .filter(|n| !n.is_empty())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Node `id`'s container ID.
    pub fn container(&self, id: u64) -> anyhow::Result<&str> {
        self.containers.get(&id).map(String::as_str).with_context(|| format!("no container for node {id}"))
    }

    fn docker(&self, args: &[&str], id: u64) -> anyhow::Result<String> {
        let cid = self.container(id)?.to_string();
        run(Command::new("docker").args(args).arg(cid))
    }

    /// SIGKILL (`docker kill`).
    pub fn kill(&self, id: u64) -> anyhow::Result<()> {
        self.docker(&["kill"], id).map(drop)
    }

    /// `docker start` (a no-op on a running container).
    pub fn start(&self, id: u64) -> anyhow::Result<()> {
        self.docker(&["start"], id).map(drop)
    }

    /// SIGTERM, then SIGKILL after `grace` (`docker stop`). True if it exited by itself.
    pub fn stop(&self, id: u64, grace: Duration) -> anyhow::Result<bool> {
        let secs = grace.as_secs().max(1).to_string();
        self.docker(&["stop", "-t", &secs], id)?;
        Ok(self.docker(&["inspect", "-f", "{{.State.ExitCode}}"], id)? == "0")
    }

    /// Freezes every process of the container (`docker pause`).
    pub fn pause(&self, id: u64) -> anyhow::Result<()> {
        self.docker(&["pause"], id).map(drop)
    }

    /// Thaws it (`docker unpause`).
    pub fn unpause(&self, id: u64) -> anyhow::Result<()> {
        self.docker(&["unpause"], id).map(drop)
    }

    /// The compose network's name.
    pub fn network(&self) -> String {
        format!("{}_leaf", self.project)
    }

    /// Detaches the container from the cluster network: no peer and no client reaches it.
    pub fn disconnect(&self, id: u64) -> anyhow::Result<()> {
        let net = self.network();
        self.docker(&["network", "disconnect", &net], id).map(drop)
    }

    /// Attaches it again (same name; peers resolve it anew).
    pub fn connect(&self, id: u64) -> anyhow::Result<()> {
        let net = self.network();
        self.docker(&["network", "connect", &net], id).map(drop)
    }

    /// The state of node `id`'s container.
    pub fn state(&self, id: u64) -> anyhow::Result<ContainerState> {
        let net = self.network();
        let fmt = format!("{{{{.State.Running}}}} {{{{.State.Paused}}}} {{{{if index .NetworkSettings.Networks \"{net}\"}}}}true{{{{else}}}}false{{{{end}}}}");
        let out = self.docker(&["inspect", "-f", &fmt], id)?;
        let f: Vec<bool> = out.split_whitespace().map(|w| w == "true").collect();
        match f[..] {
            [running, paused, attached] => Ok(ContainerState { running, paused, attached }),
            _ => bail!("unexpected docker inspect output {out:?}"),
        }
    }

    /// The container's health as Docker's healthcheck reports it.
    pub fn health(&self, id: u64) -> anyhow::Result<ContainerHealth> {
        let status =
            self.docker(&["inspect", "-f", "{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}"], id)?;
        Ok(ContainerHealth::parse(&status))
    }

    /// Waits until Docker reports every node healthy (its own healthcheck, `leaf health`).
    pub fn wait_healthy(&self, ids: &[u64], timeout: Duration) -> anyhow::Result<Duration> {
        let start = Instant::now();
        loop {
            let mut states = Vec::new();
            for &id in ids {
                states.push((id, self.health(id)?));
            }
            if states.iter().all(|(_, s)| *s == ContainerHealth::Healthy) {
                return Ok(start.elapsed());
            }
            if start.elapsed() > timeout {
                bail!("not healthy after {timeout:?}: {states:?}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The container's output (the node's log).
    pub fn logs(&self, id: u64) -> anyhow::Result<String> {
        let cid = self.container(id)?;
        let out = Command::new("docker").args(["logs", "--timestamps", cid]).output().context("docker logs")?;
        Ok(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }

    /// `docker-compose down -v --remove-orphans`: containers, network and volumes go.
    pub fn down(&mut self) -> anyhow::Result<()> {
        run(self.compose().args(["down", "--volumes", "--remove-orphans", "--timeout", "5"]))?;
        self.down = true;
        Ok(())
    }

    /// Whether a node that is attached to the network (`from`) fails to reach service
    /// `target` by name: `leaf health` run inside `from`'s container reports it unreachable.
    /// This is the peers' view of a partition, not only Docker's.
    pub fn unreachable_from(&self, from: u64, target: u64) -> anyhow::Result<bool> {
        let cid = self.container(from)?;
        // The CA comes from the container's LEAF_CA; the certificate names leaf<target>.
        let url = format!("https://leaf{target}:8080");
        let out = Command::new("docker")
            .args(["exec", cid, "/leaf", "health", "--quiet", "--url", &url])
            .output()
            .context("docker exec")?;
        Ok(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("unreachable"))
    }

    /// Containers, networks and volumes still labelled with this project.
    pub fn leftovers(&self) -> anyhow::Result<Vec<String>> {
        let label = format!("label=com.docker.compose.project={}", self.project);
        let mut out = Vec::new();
        for (kind, args) in [
            ("container", vec!["ps", "-a", "-q", "--filter", &label]),
            ("network", vec!["network", "ls", "-q", "--filter", &label]),
            ("volume", vec!["volume", "ls", "-q", "--filter", &label]),
        ] {
            let listed = run(Command::new("docker").args(&args))?;
            out.extend(listed.lines().filter(|l| !l.is_empty()).map(|l| format!("{kind} {l}")));
        }
        Ok(out)
    }
}

impl Drop for Compose {
    fn drop(&mut self) {
        if !self.down {
            if let Err(e) = self.down() {
                eprintln!("docker-compose down of {} failed: {e:#}", self.project);
            }
        }
    }
}
